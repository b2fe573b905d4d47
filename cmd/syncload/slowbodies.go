package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// slowBodies is the slow-client attack of the hardening review beside an
// ordinary workload: --slow-conns connections each declare a
// --slow-declared-bytes body and send one byte per --slow-interval, while
// the virtual clients keep doing push-pull. A connection the server
// answers or drops is opened again, so the pressure stays on. Run it with
// --server-pid to see the server's RSS growth.
func slowBodies() *scenario {
	sc := pushPull()
	sc.name = "slow-bodies"
	sc.about = "--slow-conns connections each declare --slow-declared-bytes and trickle one byte per --slow-interval " +
		"(reconnecting when answered or dropped) while the clients run push-pull; needs --server-pid for the RSS figure"
	sc.background = startSlowBodies
	return sc
}

// slowStats count what the slow connections met.
type slowStats struct {
	dials, dialErrors, open, maxOpen, bytes atomic.Int64
	mu                                      sync.Mutex
	answers                                 map[int]int64 // by status
	dropped                                 int64         // closed without an answer
}

func startSlowBodies(ctx context.Context, e *env) func() {
	u, _ := url.Parse(e.o.url) // checked by newHTTPTransport
	path := u.EscapedPath() + "/sync"
	st := &slowStats{answers: map[int]int64{}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range e.o.slowConns {
		hdr := e.identity(e.o.vus + i)
		wg.Go(func() {
			// Spread the first dials so the ramp is not one burst.
			pause(ctx, time.Duration(i)*time.Millisecond)
			for ctx.Err() == nil {
				trickle(ctx, e, u.Host, path, hdr, st)
				pause(ctx, 100*time.Millisecond)
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
		st.mu.Lock()
		defer st.mu.Unlock()
		answers := map[string]int64{}
		for code, n := range st.answers {
			answers[strconv.Itoa(code)] = n
		}
		e.note("slowConnections", e.o.slowConns)
		e.note("slowDials", st.dials.Load())
		e.note("slowDialErrors", st.dialErrors.Load())
		e.note("slowMaxOpen", st.maxOpen.Load())
		e.note("slowBytesSent", st.bytes.Load())
		e.note("slowAnswers", answers)
		e.note("slowDroppedWithoutAnswer", st.dropped)
	}
}

// trickle runs one slow connection until the server answers or drops it,
// or the run ends.
func trickle(ctx context.Context, e *env, host, path string, hdr http.Header, st *slowStats) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", host)
	st.dials.Add(1)
	if err != nil {
		st.dialErrors.Add(1)
		return
	}
	defer func() { _ = c.Close() }()
	n := st.open.Add(1)
	defer st.open.Add(-1)
	for m := st.maxOpen.Load(); n > m && !st.maxOpen.CompareAndSwap(m, n); m = st.maxOpen.Load() {
	}
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/vnd.syncular.sync.v2\r\nContent-Length: %d\r\n",
		path, host, e.o.slowDeclared)
	for k, vs := range hdr {
		for _, v := range vs {
			head += k + ": " + v + "\r\n"
		}
	}
	if _, err := c.Write([]byte(head + "\r\n")); err != nil {
		return
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answered <- 0
			return
		}
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	t := time.NewTicker(e.o.slowInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case code := <-answered:
			st.mu.Lock()
			if code == 0 {
				st.dropped++
			} else {
				st.answers[code]++
			}
			st.mu.Unlock()
			return
		case <-t.C:
			if _, err := c.Write([]byte{'s'}); err != nil {
				continue // the reader reports how it ended
			}
			st.bytes.Add(1)
		}
	}
}

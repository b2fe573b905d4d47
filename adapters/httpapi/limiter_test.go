package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// trickle is a body that yields its bytes a few at a time.
type trickle struct {
	data []byte
	step int
}

func (t *trickle) Read(p []byte) (int, error) {
	if len(t.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), t.step)], t.data)
	t.data = t.data[n:]
	return n, nil
}

func TestReadBodyGrowsWithWhatArrives(t *testing.T) {
	tr, err := httpapi.NewTransport(httpapi.TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		declared int64 // Content-Length; -1 unknown (chunked)
		sent     int
		maxCap   int
	}{
		// A client declaring the limit and sending almost nothing must
		// not make the server allocate the limit.
		{"16 MiB declared, 10 bytes sent", 16 << 20, 10, 4 << 10},
		{"16 MiB declared, nothing sent", 16 << 20, 0, 4 << 10},
		{"small exact body", 100, 100, 100},
		{"exact body past the first buffer", 10 << 10, 10 << 10, 10 << 10},
		{"unknown length", -1, 100 << 10, 200 << 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			payload := bytes.Repeat([]byte("s"), tc.sent)
			r := httptest.NewRequest(http.MethodPost, "/sync", &trickle{data: payload, step: 7})
			r.ContentLength = tc.declared
			got, err := tr.ReadBody(r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, payload) {
				t.Fatalf("read %d bytes, want %d", len(got), len(payload))
			}
			if cap(got) > tc.maxCap {
				t.Fatalf("buffer capacity %d for %d bytes received, want at most %d", cap(got), tc.sent, tc.maxCap)
			}
		})
	}
}

// rawPost writes a POST /sync head declaring length, then prefix.
func rawPost(t *testing.T, addr string, length int64, prefix []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	head := fmt.Sprintf("POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", httpapi.ContentTypeSync, length)
	if _, err := c.Write(append([]byte(head), prefix...)); err != nil {
		t.Fatal(err)
	}
	return c
}

func readAnswer(t *testing.T, c net.Conn) (*http.Response, errorBody) {
	t.Helper()
	// Bounds a hung test only; nothing asserts how long the answer took.
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var eb errorBody
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &eb)
	return resp, eb
}

// waitInUse polls the limiter until its reserved bytes are want.
func waitInUse(t *testing.T, l *httpapi.Limiter, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, b := l.InUse(); b == want {
			return
		}
		if time.Now().After(deadline) {
			_, b := l.InUse()
			t.Fatalf("reserved %d bytes, want %d", b, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func okAuth() ports.Authenticator {
	return authFunc(func(*http.Request) (ports.Identity, error) {
		return ports.Identity{ActorID: "a", Partition: "p"}, nil
	})
}

// TestLimiterBoundsSlowBodies: connections that declare 16 MiB and
// trickle bytes hold only what they actually sent, charged to the bound;
// past it they are answered sync.rate_limited with Retry-After and
// dropped, and the bound frees again when they go.
func TestLimiterBoundsSlowBodies(t *testing.T) {
	const first = httpapi.InitialBodyBufferBytes
	const budget = 16 * first
	lim, err := httpapi.NewLimiter(httpapi.LimiterOptions{MaxRequests: 4, MaxBodyBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := httpapi.NewTransport(httpapi.TransportOptions{Limiter: lim})
	srv := httptest.NewServer(tr.SyncEndpoint(okAuth(), func(w http.ResponseWriter, _ *http.Request, _ ports.Identity, body []byte) {
		_, _ = fmt.Fprintf(w, "%d", len(body))
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	var held []net.Conn
	for i := range budget / first {
		held = append(held, rawPost(t, addr, 16<<20, []byte("x")))
		waitInUse(t, lim, int64(i+1)*first)
	}
	// The bound is spent: the next slow body is refused at once.
	resp, eb := readAnswer(t, rawPost(t, addr, 16<<20, []byte("x")))
	if resp.StatusCode != http.StatusTooManyRequests || eb.Code != string(syncerr.RateLimited) ||
		resp.Header.Get("Retry-After") != "1" || !resp.Close {
		t.Fatalf("past the bound: %d %+v Retry-After %q close %v", resp.StatusCode, eb, resp.Header.Get("Retry-After"), resp.Close)
	}
	// A held body that grows past its buffer needs more of the bound.
	if _, err := held[0].Write(bytes.Repeat([]byte("y"), first+10)); err != nil {
		t.Fatal(err)
	}
	if resp, eb := readAnswer(t, held[0]); resp.StatusCode != http.StatusTooManyRequests || eb.Code != string(syncerr.RateLimited) {
		t.Fatalf("growing body: %d %+v", resp.StatusCode, eb)
	}
	waitInUse(t, lim, budget-first)
	for _, c := range held {
		_ = c.Close()
	}
	waitInUse(t, lim, 0)
	// Freed: an ordinary request is served again.
	res, err := http.Post(srv.URL, httpapi.ContentTypeSync, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != 200 || string(b) != "5" {
		t.Fatalf("after the flood: %d %s", res.StatusCode, b)
	}
}

func TestLimiterBoundsRequestsInFlight(t *testing.T) {
	lim, _ := httpapi.NewLimiter(httpapi.LimiterOptions{MaxRequests: 1})
	tr, _ := httpapi.NewTransport(httpapi.TransportOptions{Limiter: lim})
	entered, release := make(chan struct{}), make(chan struct{})
	h := tr.SyncEndpoint(okAuth(), func(w http.ResponseWriter, _ *http.Request, _ ports.Identity, _ []byte) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusNoContent)
	})
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/sync", strings.NewReader("x"))
		r.Header.Set("Content-Type", httpapi.ContentTypeSync)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	var wg sync.WaitGroup
	var first *httptest.ResponseRecorder
	wg.Go(func() { first = post() })
	<-entered
	if rec := post(); rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"sync.rate_limited"`) ||
		rec.Header().Get("Retry-After") == "" {
		t.Fatalf("second request in flight: %d %s", rec.Code, rec.Body.String())
	}
	close(release)
	wg.Wait()
	if first.Code != http.StatusNoContent {
		t.Fatalf("first request: %d", first.Code)
	}
	go func() { <-entered }()
	if rec := post(); rec.Code != http.StatusNoContent {
		t.Fatalf("after release: %d %s", rec.Code, rec.Body.String())
	}
	if n, b := lim.InUse(); n != 0 || b != 0 {
		t.Fatalf("leaked %d requests, %d bytes", n, b)
	}
}

// deadlineConn records the read deadlines set on a connection.
type deadlineConn struct {
	net.Conn
	mu  sync.Mutex
	set []time.Time
}

func (c *deadlineConn) SetReadDeadline(d time.Time) error {
	c.mu.Lock()
	c.set = append(c.set, d)
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(d)
}

func (c *deadlineConn) deadlines() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.set...)
}

type deadlineListener struct{ net.Listener }

func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &deadlineConn{Conn: c}, nil
}

type connKey struct{}

func deadlineServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = deadlineListener{srv.Listener}
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestBodyReadDeadline: the body must arrive within BodyReadTimeout of
// the clock, and the deadline is lifted before the response is written.
func TestBodyReadDeadline(t *testing.T) {
	t.Run("a body that does not arrive in time is 408", func(t *testing.T) {
		// The clock reads long ago, so the deadline has passed already.
		tr, _ := httpapi.NewTransport(httpapi.TransportOptions{BodyReadTimeout: 30 * time.Second,
			Now: func() time.Time { return time.Unix(1, 0) }})
		srv := deadlineServer(t, tr.SyncEndpoint(okAuth(), func(w http.ResponseWriter, _ *http.Request, _ ports.Identity, _ []byte) {
			t.Error("served a body that never arrived")
		}))
		resp, eb := readAnswer(t, rawPost(t, srv.Listener.Addr().String(), 100, []byte("x")))
		if resp.StatusCode != http.StatusRequestTimeout || eb.Code != string(syncerr.InvalidRequest) || !resp.Close {
			t.Fatalf("slow body: %d %+v close %v", resp.StatusCode, eb, resp.Close)
		}
	})
	t.Run("the deadline is cleared once the body is in", func(t *testing.T) {
		now := time.Now().Add(time.Hour) // far enough never to fire
		tr, _ := httpapi.NewTransport(httpapi.TransportOptions{BodyReadTimeout: 30 * time.Second,
			Now: func() time.Time { return now }})
		var during []time.Time
		srv := deadlineServer(t, tr.SyncEndpoint(okAuth(), func(w http.ResponseWriter, r *http.Request, _ ports.Identity, _ []byte) {
			during = r.Context().Value(connKey{}).(*deadlineConn).deadlines()
			w.WriteHeader(http.StatusNoContent)
		}))
		resp, _ := readAnswer(t, rawPost(t, srv.Listener.Addr().String(), 5, []byte("hello")))
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("status %d", resp.StatusCode)
		}
		var sawBodyDeadline bool
		for _, d := range during {
			sawBodyDeadline = sawBodyDeadline || d.Equal(now.Add(30*time.Second))
		}
		if !sawBodyDeadline || len(during) == 0 || !during[len(during)-1].IsZero() {
			t.Fatalf("read deadlines while serving: %v", during)
		}
	})
}

// TestLimiterFitsTheLargestBody: a body at the decoded limit, of unknown
// length while it arrives, fits a bound equal to that limit.
func TestLimiterFitsTheLargestBody(t *testing.T) {
	const limit = 64 << 10
	lim, _ := httpapi.NewLimiter(httpapi.LimiterOptions{MaxBodyBytes: limit})
	tr, _ := httpapi.NewTransport(httpapi.TransportOptions{MaxBodyBytes: limit, MaxDecodedBodyBytes: limit, Limiter: lim})
	h := tr.SyncEndpoint(okAuth(), func(w http.ResponseWriter, _ *http.Request, _ ports.Identity, body []byte) {
		_, _ = fmt.Fprintf(w, "%d", len(body))
	})
	for _, tc := range []struct {
		size   int
		status int
	}{{limit, 200}, {limit + 1, 413}} {
		r := httptest.NewRequest(http.MethodPost, "/sync", bytes.NewReader(gz(t, bytes.Repeat([]byte("z"), tc.size))))
		r.Header.Set("Content-Type", httpapi.ContentTypeSync)
		r.Header.Set("Content-Encoding", "gzip")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tc.status {
			t.Fatalf("%d decoded bytes: %d %s", tc.size, rec.Code, rec.Body.String())
		}
	}
	if n, b := lim.InUse(); n != 0 || b != 0 {
		t.Fatalf("leaked %d requests, %d bytes", n, b)
	}
}

package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
)

// testClock is an platform.Clock the test moves by hand. Sleep reports each
// call on slept (when set) and returns once the test sends on wake.
type testClock struct {
	mu    sync.Mutex
	now   time.Time
	slept chan time.Duration
	wake  chan struct{}
}

func newTestClock() *testClock { return &testClock{now: time.Unix(1_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *testClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.slept == nil {
		return ctx.Err()
	}
	c.slept <- d
	select {
	case <-c.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func useClock(c platform.Clock) fx.Option {
	return fx.Decorate(func(platform.Clock) platform.Clock { return c })
}

// pingStore is a SchemaStore and HealthChecker whose ping the test breaks.
type pingStore struct {
	mu   sync.Mutex
	down error
}

func (*pingStore) EnsureSchema(context.Context, *schema.Schema, []checkpoint.Declaration) error {
	return nil
}

func (s *pingStore) Ping(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

func (s *pingStore) set(err error) {
	s.mu.Lock()
	s.down = err
	s.mu.Unlock()
}

func readyz(t *testing.T, h *harness) (int, platform.Status) {
	t.Helper()
	code, body := get(t, "GET", h.url(platform.ServerAdmin, "/readyz"))
	var st platform.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("readyz %d %s: %v", code, body, err)
	}
	return code, st
}

// waitReadyz polls /readyz until it answers code (the deadline only
// bounds a hung test).
func waitReadyz(t *testing.T, h *harness, code int) platform.Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for h.listeners.Addr(platform.ServerAdmin) == nil {
		if time.Now().After(deadline) {
			t.Fatal("admin listener not bound")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		got, st := readyz(t, h)
		if got == code {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz %d, want %d: %+v", got, code, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wantStorageDown(t *testing.T, code int, st platform.Status) {
	t.Helper()
	if code != http.StatusServiceUnavailable || st.Ready || st.Phase != platform.PhaseReady || st.Reason != platform.ReasonDependencyDown ||
		len(st.Down) != 1 || st.Down[0] != "storage" || st.Checks["storage"].OK || st.Checks["storage"].Error == nil {
		t.Fatalf("readyz with storage down: %d %+v", code, st)
	}
}

// TestReadyzStorageCheck: /readyz probes storage through the clock's
// cache, names it while it is down, and is ready again by itself.
func TestReadyzStorageCheck(t *testing.T) {
	store := &pingStore{}
	clock := newTestClock()
	h := start(t, testConfig(t), useClock(clock),
		fx.Supply(fx.Annotate(store, fx.As(new(ports.SchemaStore)), fx.As(new(ports.HealthChecker)))))
	if st := waitReadyz(t, h, 200); !st.Checks["storage"].OK {
		t.Fatalf("ready without a storage check: %+v", st)
	}
	store.set(errors.New("dial tcp: connection refused"))
	if code, _ := readyz(t, h); code != 200 {
		t.Fatalf("probed again within the cache: %d", code)
	}
	clock.advance(time.Second)
	code, st := readyz(t, h)
	wantStorageDown(t, code, st)
	if !strings.Contains(st.Checks["storage"].Error.Message, "connection refused") {
		t.Fatalf("reason: %+v", st.Checks["storage"].Error)
	}
	store.set(nil)
	clock.advance(time.Second)
	if code, st := readyz(t, h); code != 200 || !st.Ready {
		t.Fatalf("storage back: %d %+v", code, st)
	}
	h.app.RequireStop()
}

// tcpProxy forwards connections to target until stopped; start listens
// again on the same address, as a database coming back would.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target, addr: "127.0.0.1:0"}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
}

// stop refuses new connections and breaks the open ones.
func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestReadyzStorageEngines runs the storage check against the real
// engines: PostgreSQL reached through a proxy that goes away and comes
// back (the shared server itself keeps running), SQLite with its store
// closed under the server.
func TestReadyzStorageEngines(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		proxy := newProxy(t, u.Host)
		u.Host = proxy.addr
		cfg := testConfig(t)
		cfg.Database = u.String()
		// Only storage is under test: the LISTEN/NOTIFY fanout, which
		// would go through the proxy too, has its own readiness test.
		cfg.Fanout = config.FanoutLocal
		clock := newTestClock()
		h := start(t, cfg, wiring.StorageModule, useClock(clock))
		waitReadyz(t, h, 200)

		proxy.stop()
		clock.advance(time.Second)
		code, st := readyz(t, h)
		wantStorageDown(t, code, st)

		proxy.start()
		// Each pooled connection the outage broke fails one query before
		// the pool drops it; a later probe gets a fresh one.
		for probe := 0; ; probe++ {
			clock.advance(time.Second)
			code, st := readyz(t, h)
			if code == 200 && st.Ready {
				break
			}
			if probe == 20 {
				t.Fatalf("database back: %d %+v %+v", code, st, st.Checks["storage"].Error)
			}
			t.Logf("probe %d: %+v", probe, st.Checks["storage"].Error)
		}
		h.app.RequireStop()
	})
	t.Run("sqlite", func(t *testing.T) {
		var st ports.Storage
		clock := newTestClock()
		h := start(t, testConfig(t), wiring.StorageModule, useClock(clock), fx.Populate(&st))
		waitReadyz(t, h, 200)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		clock.advance(time.Second)
		code, status := readyz(t, h)
		wantStorageDown(t, code, status)
		h.app.RequireStop()
	})
}

// TestGracefulShutdown follows a stop through its steps: /readyz turns
// draining while the listener keeps serving for the shutdown delay (the
// clock's Sleep, which the test ends), then the listener closes, the
// request in flight finishes, and the process exit code is 0.
func TestGracefulShutdown(t *testing.T) {
	cfg := testConfig(t)
	cfg.ShutdownDelay = 7 * time.Second
	clock := newTestClock()
	clock.slept, clock.wake = make(chan time.Duration), make(chan struct{})
	entered, finish := make(chan struct{}), make(chan struct{})
	route := fx.Provide(fx.Annotate(func() platform.RouteHandler {
		return platform.RouteHandler{Route: httpapi.RouteSync, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Hold") != "" {
				entered <- struct{}{}
				<-finish
			}
			w.WriteHeader(http.StatusNoContent)
		})}
	}, fx.ResultTags(`group:"syncd.routes"`)))
	type graph struct {
		shutdown fx.Shutdowner
		h        *harness
	}
	got := make(chan graph, 1)
	capture := fx.Invoke(func(s fx.Shutdowner, l *platform.Listeners, r *platform.Readiness) {
		got <- graph{s, &harness{listeners: l, readiness: r}}
	})
	exit := make(chan int, 1)
	go func() {
		exit <- app.Run(cfg, platform.ReadBuildInfo("test"), zaptest.NewLogger(t), route, useClock(clock), capture)
	}()
	g := <-got
	h := g.h
	waitReadyz(t, h, 200)

	post := func(hold bool) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, h.url(platform.ServerSync, "/sync"), strings.NewReader(""))
		if hold {
			req.Header.Set("X-Hold", "1")
		}
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	inflight := make(chan int, 1)
	go func() { code, _ := post(true); inflight <- code }()
	<-entered

	// SIGTERM and the Shutdowner take the same path through Run.
	if err := g.shutdown.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if d := <-clock.slept; d != cfg.ShutdownDelay {
		t.Fatalf("shutdown delay %s, want %s", d, cfg.ShutdownDelay)
	}
	// The lame-duck window: not ready, still serving.
	code, st := readyz(t, h)
	if code != http.StatusServiceUnavailable || st.Ready || !st.Draining || st.Reason != platform.ReasonDraining {
		t.Fatalf("readyz while draining: %d %+v", code, st)
	}
	if code, err := post(false); err != nil || code != http.StatusNoContent {
		t.Fatalf("request during the shutdown delay: %d %v", code, err)
	}
	close(clock.wake)

	// The listener closes while the held request is still in flight.
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", h.listeners.Addr(platform.ServerSync).String())
		if err != nil {
			break
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatal("sync listener still accepting after the shutdown delay")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case code := <-exit:
		t.Fatalf("exited (%d) with a request in flight", code)
	default:
	}
	close(finish)
	if code := <-inflight; code != http.StatusNoContent {
		t.Fatalf("in-flight request: %d", code)
	}
	if code := <-exit; code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestShutdownTimeoutBoundsInFlight: a request that outlives
// --shutdown-timeout makes the stop unclean (exit code 1).
func TestShutdownTimeoutBoundsInFlight(t *testing.T) {
	cfg := testConfig(t)
	cfg.ShutdownTimeout = time.Millisecond // expires while the request is held
	entered, finish := make(chan struct{}), make(chan struct{})
	defer close(finish)
	route := fx.Provide(fx.Annotate(func() platform.RouteHandler {
		return platform.RouteHandler{Route: httpapi.RouteSync, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			entered <- struct{}{}
			<-finish
		})}
	}, fx.ResultTags(`group:"syncd.routes"`)))
	got := make(chan *harness, 1)
	var shutdown fx.Shutdowner
	capture := fx.Invoke(func(s fx.Shutdowner, l *platform.Listeners, r *platform.Readiness) {
		shutdown = s
		got <- &harness{listeners: l, readiness: r}
	})
	exit := make(chan int, 1)
	// Not the test's logger: the stop hooks the timeout cut short still
	// run, and log, after the test has ended.
	go func() { exit <- app.Run(cfg, platform.ReadBuildInfo("test"), zap.NewNop(), route, capture) }()
	h := <-got
	waitReadyz(t, h, 200)
	go func() { _, _ = http.Post(h.url(platform.ServerSync, "/sync"), "text/plain", nil) }()
	<-entered
	if err := shutdown.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if code := <-exit; code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
}

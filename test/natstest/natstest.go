// Package natstest gives tests a NATS server.
//
// URL is the server of SYNCD_TEST_NATS_URL when it is set (scripts/test
// and .ci/run set it when a server answers on 127.0.0.1:4222), otherwise
// one started in this process (github.com/nats-io/nats-server/v2); Start
// always starts one in process, for tests that stop and restart it. When
// neither works the test is skipped with a loud message, or fails under
// SYNCD_REQUIRE_NATS=1 or CI. Proxy sits between a client and a server so
// a test can cut the client's connections.
package natstest

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Environment variables read by this package.
const (
	EnvURL     = "SYNCD_TEST_NATS_URL"
	EnvRequire = "SYNCD_REQUIRE_NATS"
)

// URL returns the NATS server to test against: SYNCD_TEST_NATS_URL (which
// must answer), or a server started in process for this test.
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvURL); u != "" {
		addr := u
		if i := strings.Index(addr, "://"); i >= 0 {
			addr = addr[i+3:]
		}
		if i := strings.LastIndex(addr, "@"); i >= 0 {
			addr = addr[i+1:]
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("natstest: %s=%s does not answer: %v", EnvURL, u, err)
		}
		_ = c.Close()
		return u
	}
	return Start(t).URL()
}

// Server is a NATS server in this process, stopped when the test ends.
type Server struct {
	t    testing.TB
	port int

	mu  sync.Mutex
	srv *server.Server
}

// Start runs a NATS server in process on a free 127.0.0.1 port.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t}
	if err := s.start(-1); err != nil {
		unavailable(t, "could not start an in-process NATS server: "+err.Error())
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start(port int) error {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		return err
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return errors.New("not ready for connections within 30s")
	}
	s.mu.Lock()
	s.srv = srv
	s.port = srv.Addr().(*net.TCPAddr).Port
	s.mu.Unlock()
	return nil
}

// URL is the server's client URL.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "nats://127.0.0.1:" + strconv.Itoa(s.port)
}

// Stop shuts the server down and waits for it; its clients see the
// connection end.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart stops the server (if running) and starts a new one on the same
// port: what the clients see of a NATS server restart.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.mu.Lock()
	port := s.port
	s.mu.Unlock()
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err = s.start(port); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		s.t.Fatalf("natstest: restart on port %d: %v", port, err)
	}
}

// unavailable skips t loudly, or fails it when NATS is required.
func unavailable(t testing.TB, why string) {
	t.Helper()
	msg := "\n*** NATS TESTS SKIPPED: " + why + " ***\n" +
		"*** Set " + EnvURL + " to a running server (e.g. nats://127.0.0.1:4222). ***"
	if os.Getenv(EnvRequire) == "1" || os.Getenv("CI") != "" {
		t.Fatal(msg + "\n*** " + EnvRequire + "=1 or CI: a NATS server is required. ***")
	}
	t.Skip(msg)
}

// Proxy forwards TCP connections to a NATS server; Cut drops the ones
// open, as a network failure would (new connections still go through).
type Proxy struct {
	ln       net.Listener
	target   string
	userinfo string // "user:password@" or "token@" of the target URL

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	blocked bool
	done    bool
	wg      sync.WaitGroup
}

// NewProxy listens on a free 127.0.0.1 port and forwards to the host:port
// of the NATS URL target; it closes when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	addr, userinfo := target, ""
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	if i := strings.LastIndex(addr, "@"); i >= 0 {
		addr, userinfo = addr[i+1:], addr[:i+1]
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: addr, userinfo: userinfo, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's client URL, with the target's credentials.
func (p *Proxy) URL() string { return "nats://" + p.userinfo + p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		blocked := p.blocked
		p.mu.Unlock()
		if blocked {
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.wg.Go(func() { p.pipe(c, up) })
		p.wg.Go(func() { p.pipe(up, c) })
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every connection open through the proxy.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Block cuts the open connections and refuses new ones until Unblock:
// the server is unreachable for this proxy's clients only.
func (p *Proxy) Block() {
	p.mu.Lock()
	p.blocked = true
	p.mu.Unlock()
	p.Cut()
}

// Unblock lets connections through again.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	p.blocked = false
	p.mu.Unlock()
}

// Close stops the proxy and its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// Package fakes3 starts an S3-compatible object server for tests: the
// gofakes3 in-memory backend served over HTTP on a loopback listener, so
// S3 clients are tested through their real wire protocol, not a mock.
// Unlike gofakes3 alone, the server checks every request's SigV4
// signature as S3 does (sigv4.go), presigned URLs included: a URL signed
// for other bytes, another length, another key or past its expiry is
// refused with 403.
package fakes3

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running fake S3 server.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:<port>.
	URL     string
	backend *s3mem.Backend

	mu    sync.Mutex
	clock func() time.Time
	// refused counts the requests refused for their signature.
	refused int
}

// The credentials and region the server accepts: a request signed with
// any other is refused.
const (
	AccessKeyID     = "test-access-key"
	SecretAccessKey = "test-secret-key"
	Region          = "us-east-1"
)

// Start serves a fresh, empty server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	backend := s3mem.New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fakes3: listen: %v", err)
	}
	s := &Server{backend: backend, clock: time.Now}
	next := gofakes3.New(backend).Server()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, msg := s.verify(r); code != "" {
			s.mu.Lock()
			s.refused++
			s.mu.Unlock()
			refuse(w, code, msg)
			return
		}
		next.ServeHTTP(w, r)
	})}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("fakes3: serve: %v", err)
		}
	})
	s.URL = "http://" + ln.Addr().String()
	return s
}

// SetClock sets the time the server checks signatures against (default
// the wall clock).
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	s.clock = now
	s.mu.Unlock()
}

func (s *Server) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock()
}

// Refused returns how many requests the server refused for their
// signature.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Bucket creates a bucket and returns its name.
func (s *Server) Bucket(t testing.TB, name string) string {
	t.Helper()
	if err := s.backend.CreateBucket(name); err != nil {
		t.Fatalf("fakes3: create bucket %s: %v", name, err)
	}
	return name
}

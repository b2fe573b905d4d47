// Package fakes3 starts an S3-compatible object server for tests: the
// gofakes3 in-memory backend served over HTTP on a loopback listener, so
// S3 clients are tested through their real wire protocol, not a mock.
package fakes3

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running fake S3 server.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:<port>.
	URL     string
	backend *s3mem.Backend
}

// Credentials the server accepts (it accepts any; these are what tests
// configure their clients with).
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
	srv := &http.Server{Handler: gofakes3.New(backend).Server()}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("fakes3: serve: %v", err)
		}
	})
	return &Server{URL: "http://" + ln.Addr().String(), backend: backend}
}

// Bucket creates a bucket and returns its name.
func (s *Server) Bucket(t testing.TB, name string) string {
	t.Helper()
	if err := s.backend.CreateBucket(name); err != nil {
		t.Fatalf("fakes3: create bucket %s: %v", name, err)
	}
	return name
}

package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Limiter defaults, sized for a small (2-core) node: SQLite serializes
// writes anyway, and 64 MiB holds one body at the default decoded limit.
const (
	DefaultMaxInflightRequests  = 64
	DefaultMaxInflightBodyBytes = 64 << 20
)

// LimiterOptions configure a Limiter.
type LimiterOptions struct {
	// MaxRequests bounds the /sync requests being processed at once (their
	// body read); requests still receiving a body count only against
	// MaxBodyBytes. Default DefaultMaxInflightRequests.
	MaxRequests int
	// MaxBodyBytes bounds the request-body memory all /sync requests hold
	// together, counted as buffer capacity while bodies arrive and until
	// their handlers return, with the buffers of every blob transfer
	// (upload or download) for its duration. Default
	// DefaultMaxInflightBodyBytes.
	MaxBodyBytes int64
}

// Limiter bounds in-flight /sync work and the body memory it and blob
// transfers hold. A
// request past a bound is refused with sync.rate_limited (429), never
// queued, so a flood of slow clients cannot pin memory or goroutines
// behind a queue. It is safe for concurrent use.
type Limiter struct {
	maxRequests int
	maxBytes    int64

	mu       sync.Mutex
	requests int
	bytes    int64
}

// NewLimiter validates opts and builds a Limiter.
func NewLimiter(opts LimiterOptions) (*Limiter, error) {
	l := &Limiter{maxRequests: opts.MaxRequests, maxBytes: opts.MaxBodyBytes}
	if l.maxRequests == 0 {
		l.maxRequests = DefaultMaxInflightRequests
	}
	if l.maxBytes == 0 {
		l.maxBytes = DefaultMaxInflightBodyBytes
	}
	if l.maxRequests < 0 || l.maxBytes < 0 {
		return nil, fmt.Errorf("httpapi: limiter bounds must be positive")
	}
	return l, nil
}

// InUse returns the requests being processed and the body bytes reserved.
func (l *Limiter) InUse() (requests int, bodyBytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.requests, l.bytes
}

// Lease is one request's share of a Limiter: the body bytes it reserved
// and whether it holds a processing slot. A nil *Lease reserves nothing
// and always succeeds. Release returns everything.
type Lease struct {
	l     *Limiter
	bytes int64
	slot  bool
}

// Lease starts an empty lease for one request.
func (l *Limiter) Lease() *Lease {
	if l == nil {
		return nil
	}
	return &Lease{l: l}
}

// reserve adds n bytes to the lease, or refuses when the bound would be
// passed.
func (s *Lease) reserve(n int64) error {
	if s == nil || n <= 0 {
		return nil
	}
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bytes+n > l.maxBytes {
		return errRateLimited("request body memory")
	}
	l.bytes += n
	s.bytes += n
	return nil
}

// unreserve returns n bytes of the lease (a buffer replaced by a larger one).
func (s *Lease) unreserve(n int64) {
	if s == nil || n <= 0 {
		return
	}
	n = min(n, s.bytes)
	s.l.mu.Lock()
	s.l.bytes -= n
	s.l.mu.Unlock()
	s.bytes -= n
}

// acquire takes a processing slot, or refuses when all are taken.
func (s *Lease) acquire() error {
	if s == nil || s.slot {
		return nil
	}
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.requests >= l.maxRequests {
		return errRateLimited("in-flight requests")
	}
	l.requests++
	s.slot = true
	return nil
}

// Release returns the lease's bytes and slot; later calls do nothing.
func (s *Lease) Release() {
	if s == nil {
		return
	}
	s.l.mu.Lock()
	s.l.bytes -= s.bytes
	if s.slot {
		s.l.requests--
	}
	s.l.mu.Unlock()
	s.bytes, s.slot = 0, false
}

// RetryAfterSeconds is the Retry-After of a limiter refusal: in-flight
// work drains within moments, so clients may retry soon (with their own
// backoff on repeated refusals).
const RetryAfterSeconds = "1"

// rateLimitedError is a limiter refusal; WriteTransportError adds
// Retry-After for it.
type rateLimitedError struct{ err *syncerr.Error }

func (e *rateLimitedError) Error() string { return e.err.Error() }
func (e *rateLimitedError) Unwrap() error { return e.err }

func errRateLimited(what string) error {
	return &rateLimitedError{syncerr.Newf(syncerr.RateLimited, "%s bound reached", what).
		WithMessage("server busy; retry later")}
}

// setRetryAfter marks a limiter refusal's answer with Retry-After.
func setRetryAfter(w http.ResponseWriter, err error) {
	var rl *rateLimitedError
	if errors.As(err, &rl) {
		w.Header().Set("Retry-After", RetryAfterSeconds)
	}
}

// Share implements ports.Inflight: a Lease of its own for one socket's
// message or round, on the same bounds as the /sync bodies.
func (l *Limiter) Share() ports.InflightShare {
	if l == nil {
		return noShare{}
	}
	return &share{l.Lease()}
}

// share is a Lease as a ports.InflightShare.
type share struct{ *Lease }

func (s *share) Reserve(n int64) error { return s.reserve(n) }
func (s *share) Unreserve(n int64)     { s.unreserve(n) }
func (s *share) Acquire() error        { return s.acquire() }

// noShare is the share of a missing Limiter: no bound.
type noShare struct{}

func (noShare) Reserve(int64) error { return nil }
func (noShare) Unreserve(int64)     {}
func (noShare) Acquire() error      { return nil }
func (noShare) Release()            {}

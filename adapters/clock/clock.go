// Package clock holds the two ports.Clock implementations: the wall clock
// of production and a virtual clock that moves only by Advance (test
// hosts: nothing on it ever expires by itself, expiry is judged at use).
package clock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Wall is the system clock.
type Wall struct{}

// Now returns time.Now().
func (Wall) Now() time.Time { return time.Now() }

// Sleep waits d, or until ctx ends (returning its error).
func (Wall) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Virtual is a clock at a fixed millisecond until Advance moves it. It is
// safe for concurrent use.
type Virtual struct {
	mu sync.Mutex
	ms int64
}

// NewVirtual returns a virtual clock reading startMs (unix milliseconds).
func NewVirtual(startMs int64) *Virtual { return &Virtual{ms: startMs} }

// Now returns the current virtual time.
func (v *Virtual) Now() time.Time { return time.UnixMilli(v.NowMs()) }

// NowMs returns the current virtual time in unix milliseconds.
func (v *Virtual) NowMs() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ms
}

// ErrBackwards refuses a negative Advance: time read by the server never
// goes back (commit timestamps and expiries would stop being monotonic).
var ErrBackwards = errors.New("clock: a virtual clock only moves forward")

// Advance moves the clock forward by ms milliseconds and returns the new
// reading.
func (v *Virtual) Advance(ms int64) (int64, error) {
	if ms < 0 {
		return 0, ErrBackwards
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ms += ms
	return v.ms, nil
}

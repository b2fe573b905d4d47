package app

import (
	"context"
	"time"
)

// Clock is the app layer's time source: the readiness checks' cache, the
// body read deadline and the lame-duck delay read it, so tests drive them
// without waiting. Replace it with fx.Decorate.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends (returning its error).
	Sleep(ctx context.Context, d time.Duration) error
}

// NewClock returns the system clock.
func NewClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
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

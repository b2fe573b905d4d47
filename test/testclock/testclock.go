// Package testclock is a clock a test moves by hand, for the code that
// reads time through ports.Clock.
package testclock

import (
	"context"
	"sync"
	"time"
)

// Manual reads the time it was set to and moves only when the test says.
type Manual struct {
	mu    sync.Mutex
	now   time.Time
	steps chan struct{}
}

// New returns a clock at now whose Sleep returns at once (unless ctx is
// done): a loop on it runs as fast as it can.
func New(now time.Time) *Manual { return &Manual{now: now} }

// Stepped returns a clock at now whose every Sleep waits for Step, so a
// test decides when each wait of a periodic loop ends.
func Stepped(now time.Time) *Manual { return &Manual{now: now, steps: make(chan struct{})} }

// Now returns the clock's reading.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Sleep returns when the test steps a Stepped clock, at once on the other
// kind, and with ctx's error once ctx is done.
func (c *Manual) Sleep(ctx context.Context, _ time.Duration) error {
	if c.steps == nil {
		return ctx.Err()
	}
	select {
	case <-c.steps:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Step ends one Sleep of a Stepped clock, waiting until one is sleeping.
func (c *Manual) Step() { c.steps <- struct{}{} }

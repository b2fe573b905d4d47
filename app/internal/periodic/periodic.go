// Package periodic runs a use case's pass every interval on the app
// clock (the retention scheduler, the blob sweep): one Start/Stop loop
// instead of one per use case.
package periodic

import (
	"context"
	"sync"
	"time"
)

// SleepFunc waits d on the app clock, or returns ctx's error.
type SleepFunc func(ctx context.Context, d time.Duration) error

// Loop runs pass every interval (the first after one interval).
type Loop struct {
	interval time.Duration
	sleep    SleepFunc
	pass     func(ctx context.Context)

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a stopped loop.
func New(interval time.Duration, sleep SleepFunc, pass func(ctx context.Context)) *Loop {
	return &Loop{interval: interval, sleep: sleep, pass: pass}
}

// Start launches the loop and returns at once. Starting twice, or with no
// interval, is a no-op.
func (l *Loop) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil || l.interval <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(ctx, l.done)
}

// Stop ends the loop and waits for a running pass to return (or ctx).
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel, l.done = nil, nil
	l.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Loop) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		if err := l.sleep(ctx, l.interval); err != nil {
			return
		}
		l.pass(ctx)
		if ctx.Err() != nil {
			return
		}
	}
}

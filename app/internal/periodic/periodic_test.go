package periodic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/internal/periodic"
)

// TestLoop: passes run after each interval's sleep, not before the
// first; Stop ends the loop; no interval never starts.
func TestLoop(t *testing.T) {
	var sleeps, passes atomic.Int32
	sleep := func(ctx context.Context, d time.Duration) error {
		if d != time.Hour {
			t.Errorf("slept %v, want the interval", d)
		}
		if sleeps.Add(1) > 3 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	l := periodic.New(time.Hour, sleep, func(context.Context) { passes.Add(1) })
	l.Start()
	l.Start() // no-op
	for passes.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := passes.Load(); got != 3 {
		t.Fatalf("%d passes for 3 completed sleeps", got)
	}
	idle := periodic.New(0, sleep, func(context.Context) { t.Error("a loop without interval ran") })
	idle.Start()
	if err := idle.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

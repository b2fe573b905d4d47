package platform

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/syncd-dev/syncd/test/testclock"
	"go.uber.org/zap"
)

// TestKeyReloaderIntervalRunsOnTheAppClock: --key-reload-interval waits
// on the app clock: each interval that passes there checks the files.
func TestKeyReloaderIntervalRunsOnTheAppClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "url.keys")
	if err := os.WriteFile(path, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := NewKeyReloader(zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var loads atomic.Int32
	r.Watch("--signed-url-key-file", path, func() (int, error) { loads.Add(1); return 1, nil })
	clk := testclock.Stepped(time.Unix(1000, 0))
	hup := make(chan os.Signal, 1)
	stop, done := make(chan struct{}), make(chan struct{})
	go r.Run(clk, time.Hour, hup, stop, done)
	if err := os.WriteFile(path, []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Three intervals pass: the third wait began only once the first
	// interval's check was taken, and the second's delivered after it.
	for range 3 {
		clk.Step()
	}
	close(stop)
	<-done
	if n := loads.Load(); n != 1 {
		t.Fatalf("changed file loaded %d times after the intervals, want 1", n)
	}
}

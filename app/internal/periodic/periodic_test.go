package periodic_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/ports"
)

// stepClock's Sleep returns each time the test steps it: a virtual clock
// on which one step is one interval.
type stepClock struct {
	step  chan struct{}
	slept chan time.Duration
}

func newStepClock() stepClock {
	return stepClock{step: make(chan struct{}), slept: make(chan time.Duration, 16)}
}

func (c stepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept <- d
	select {
	case <-c.step:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tick lets one interval pass and waits until the loop sleeps again,
// so the pass it triggered is over.
func (c stepClock) tick(t *testing.T) {
	t.Helper()
	c.step <- struct{}{}
	select {
	case <-c.slept:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not sleep again after a pass")
	}
}

func TestScheduler(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		results []error // the passes' results, in order
		timeout time.Duration
		// wantWarns are the "failed" lines logged, in order.
		wantWarns []string
	}{
		{name: "passes that succeed log nothing", results: []error{nil, nil, nil}},
		{name: "a failed pass is logged and the next interval still runs",
			results: []error{boom, nil, boom}, wantWarns: []string{"boom", "boom"}},
		{name: "a timeout bounds one pass", results: []error{nil}, timeout: time.Millisecond,
			wantWarns: []string{context.DeadlineExceeded.Error()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newStepClock()
			core, logs := observer.New(zap.WarnLevel)
			s, err := periodic.New(clk.Sleep, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			var passes atomic.Int32
			job := periodic.Job{Name: "test pass", Interval: time.Hour, Timeout: tt.timeout, Pass: func(ctx context.Context) error {
				n := passes.Add(1)
				if tt.timeout > 0 {
					<-ctx.Done()
					return ctx.Err()
				}
				return tt.results[n-1]
			}}
			r := s.Start(job)
			if d := <-clk.slept; d != time.Hour {
				t.Fatalf("slept %v before the first pass, want the interval", d)
			}
			if passes.Load() != 0 {
				t.Fatal("a pass ran before the first interval")
			}
			for range tt.results {
				clk.tick(t)
			}
			if err := r.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := int(passes.Load()); got != len(tt.results) {
				t.Fatalf("%d passes for %d intervals", got, len(tt.results))
			}
			var warns []string
			for _, e := range logs.All() {
				if e.Message != "test pass failed" {
					t.Errorf("logged %q", e.Message)
				}
				warns = append(warns, e.ContextMap()["error"].(string))
			}
			if strings.Join(warns, "|") != strings.Join(tt.wantWarns, "|") {
				t.Fatalf("failed passes logged %q, want %q", warns, tt.wantWarns)
			}
		})
	}
}

// TestSchedulerStop: Stop ends a loop waiting for its interval and one in
// the middle of a pass (cancelling the pass, which is not logged as a
// failure), and no pass starts after it; a job without interval never
// runs.
func TestSchedulerStop(t *testing.T) {
	clk := newStepClock()
	core, logs := observer.New(zap.WarnLevel)
	s, err := periodic.New(clk.Sleep, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	// Waiting for the interval.
	var passes atomic.Int32
	r := s.Start(periodic.Job{Name: "idle", Interval: time.Hour, Pass: func(context.Context) error { passes.Add(1); return nil }})
	<-clk.slept
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	// In a pass.
	inPass := make(chan struct{})
	r = s.Start(periodic.Job{Name: "busy", Interval: time.Hour, Pass: func(ctx context.Context) error {
		close(inPass)
		<-ctx.Done()
		return ctx.Err()
	}})
	<-clk.slept
	clk.step <- struct{}{}
	<-inPass
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Fatalf("a pass cancelled by Stop was logged: %v", logs.All())
	}
	// No interval.
	r = s.Start(periodic.Job{Name: "off", Pass: func(context.Context) error { t.Error("a job without interval ran"); return nil }})
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if passes.Load() != 0 {
		t.Fatal("a pass ran without its interval passing")
	}
	if _, err := periodic.New(nil, nil); err == nil {
		t.Fatal("a scheduler without a clock was built")
	}
}

type partitions struct {
	names []string
	err   error
}

func (p partitions) ListPartitions(context.Context) ([]ports.PartitionInfo, error) {
	out := make([]ports.PartitionInfo, len(p.names))
	for i, n := range p.names {
		out[i] = ports.PartitionInfo{Partition: n}
	}
	return out, p.err
}

func TestEachPartition(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		parts       partitions
		failing     map[string]bool
		cancelAfter string // ctx ends after this partition
		wantVisited string
		wantErr     string
	}{
		{name: "every partition is visited", parts: partitions{names: []string{"a", "b", "c"}}, wantVisited: "a,b,c"},
		{name: "no partitions", parts: partitions{}, wantVisited: ""},
		{name: "a failing partition does not stop the others; errors are joined with their partition",
			parts: partitions{names: []string{"a", "b", "c"}}, failing: map[string]bool{"a": true, "c": true},
			wantVisited: "a,b,c", wantErr: "partition \"a\": boom\npartition \"c\": boom"},
		{name: "the list fails", parts: partitions{err: boom}, wantErr: "list partitions: boom"},
		{name: "an ended context stops the walk", parts: partitions{names: []string{"a", "b", "c"}}, cancelAfter: "a",
			wantVisited: "a", wantErr: context.Canceled.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var visited []string
			err := periodic.EachPartition(ctx, tt.parts, func(_ context.Context, p string) error {
				visited = append(visited, p)
				if p == tt.cancelAfter {
					cancel()
				}
				if tt.failing[p] {
					return boom
				}
				return nil
			})
			if got := strings.Join(visited, ","); got != tt.wantVisited {
				t.Errorf("visited %q, want %q", got, tt.wantVisited)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if tt.failing["a"] && !errors.Is(err, boom) {
				t.Fatal("the joined error does not match the partition's")
			}
		})
	}
}

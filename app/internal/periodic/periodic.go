// Package periodic is the one scheduler of the server's periodic jobs
// (commit-log retention, the blob GC, the reaction and lease prunes,
// the segment sweep): each job is a use case's single pass, and this
// package owns what they share — the loop on the app clock, logging a
// failed pass, stopping on shutdown, and the "every partition, errors
// joined" walk of the per-partition jobs.
package periodic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/ports"
)

// SleepFunc waits d on the app clock, or returns ctx's error.
type SleepFunc func(ctx context.Context, d time.Duration) error

// Job is one periodic use case, as the wiring schedules it.
type Job struct {
	// Name says what runs; a failed pass is logged as "<Name> failed".
	Name string
	// Interval is the wait before each pass (the first included); a job
	// without one never runs.
	Interval time.Duration
	// Timeout, when set, bounds one pass.
	Timeout time.Duration
	// Pass is the use case's one pass.
	Pass func(ctx context.Context) error
	// Log hears the failed passes (default the scheduler's).
	Log *zap.Logger
}

// Scheduler runs jobs, each in its own goroutine, sleeping on the app
// clock between passes.
type Scheduler struct {
	sleep SleepFunc
	log   *zap.Logger
}

// New returns a scheduler sleeping on sleep (the app clock's Sleep, so a
// test clock drives every job) and logging on log (nil: nowhere).
func New(sleep SleepFunc, log *zap.Logger) (*Scheduler, error) {
	if sleep == nil {
		return nil, errors.New("periodic: a sleep function is required")
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Scheduler{sleep: sleep, log: log}, nil
}

// Running is one started job.
type Running struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start launches j's loop and returns at once; the first pass runs after
// one interval. A job without interval or pass is not started (its
// Running stops at once).
func (s *Scheduler) Start(j Job) *Running {
	r := &Running{done: make(chan struct{})}
	if j.Interval <= 0 || j.Pass == nil {
		r.cancel = func() {}
		close(r.done)
		return r
	}
	if j.Log == nil {
		j.Log = s.log
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go s.run(ctx, j, r.done)
	return r
}

// Stop ends the loop and waits for a running pass to return (or ctx).
// Stopping twice is harmless.
func (r *Running) Stop(ctx context.Context) error {
	r.once.Do(r.cancel)
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Scheduler) run(ctx context.Context, j Job, done chan struct{}) {
	defer close(done)
	for s.sleep(ctx, j.Interval) == nil {
		err := pass(ctx, j)
		if ctx.Err() != nil {
			return // the server stops: not a failure
		}
		if err != nil {
			j.Log.Warn(j.Name+" failed", zap.Error(err))
		}
	}
}

func pass(ctx context.Context, j Job) error {
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, j.Timeout)
		defer cancel()
	}
	return j.Pass(ctx)
}

// Partitions lists the registered partitions (ports.PartitionStore has
// it).
type Partitions interface {
	ListPartitions(ctx context.Context) ([]ports.PartitionInfo, error)
}

// EachPartition runs fn on every registered partition in turn. A failing
// partition does not stop the others: the errors are joined, each
// wrapped with its partition; ending ctx stops the walk with ctx's error.
func EachPartition(ctx context.Context, parts Partitions, fn func(ctx context.Context, partition string) error) error {
	infos, err := parts.ListPartitions(ctx)
	if err != nil {
		return fmt.Errorf("list partitions: %w", err)
	}
	var errs []error
	for _, in := range infos {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fn(ctx, in.Partition); err != nil {
			errs = append(errs, fmt.Errorf("partition %q: %w", in.Partition, err))
		}
	}
	return errors.Join(errs...)
}

package reactions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/ports"
)

// Retention defaults of SPEC §6.9.
const (
	DefaultKeepCompleted  = 30 * 24 * time.Hour
	DefaultKeepDeadLetter = 90 * 24 * time.Hour
	DefaultPruneLimit     = 1000
	// maxPrunePasses bounds the passes over one partition in one run, so
	// a backlog is worked off over several runs, never in one long one.
	maxPrunePasses = 100
)

// PruneOptions configure a Pruner.
type PruneOptions struct {
	Queue      ports.ReactionQueue
	Partitions ports.PartitionStore
	// KeepCompleted and KeepDeadLetter default to 30 and 90 days.
	KeepCompleted, KeepDeadLetter time.Duration
	// Limit is the rows one pass deletes at most (default 1000).
	Limit int
	Now   func() time.Time
	Log   *zap.Logger
}

// Pruner deletes terminal reactions past their retention (SPEC §6.9
// terminal retention), partition by partition.
type Pruner struct{ o PruneOptions }

// NewPruner builds a Pruner.
func NewPruner(o PruneOptions) (*Pruner, error) {
	if o.Queue == nil || o.Partitions == nil {
		return nil, errors.New("reactions: the pruner needs a ReactionQueue and a PartitionStore")
	}
	if o.KeepCompleted <= 0 {
		o.KeepCompleted = DefaultKeepCompleted
	}
	if o.KeepDeadLetter <= 0 {
		o.KeepDeadLetter = DefaultKeepDeadLetter
	}
	if o.Limit <= 0 {
		o.Limit = DefaultPruneLimit
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Pruner{o: o}, nil
}

// PruneResult is one partition's removals.
type PruneResult struct {
	Partition              string
	Completed, DeadLetters int
	// MayHaveMore is true when the run stopped at its pass bound.
	MayHaveMore bool
}

// Prune runs passes over one partition until one reports nothing more
// (at most 100 passes), with cutoffs fixed at the start.
func (p *Pruner) Prune(ctx context.Context, partition string) (PruneResult, error) {
	now := p.o.Now()
	q := ports.ReactionPrune{
		CompletedBeforeMs:  now.Add(-p.o.KeepCompleted).UnixMilli(),
		DeadLetterBeforeMs: now.Add(-p.o.KeepDeadLetter).UnixMilli(),
		Limit:              p.o.Limit,
	}
	res := PruneResult{Partition: partition}
	for range maxPrunePasses {
		n, err := p.o.Queue.PruneReactions(ctx, partition, q)
		if err != nil {
			return res, fmt.Errorf("prune reactions: %w", err)
		}
		res.Completed += n.Completed
		res.DeadLetters += n.DeadLetter
		res.MayHaveMore = n.MayHaveMore
		if !n.MayHaveMore {
			break
		}
	}
	return res, nil
}

// PruneAll prunes every registered partition; a failing partition does
// not stop the others.
func (p *Pruner) PruneAll(ctx context.Context) ([]PruneResult, error) {
	infos, err := p.o.Partitions.ListPartitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	var out []PruneResult
	var errs []error
	for _, in := range infos {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		r, err := p.Prune(ctx, in.Partition)
		if err != nil {
			errs = append(errs, fmt.Errorf("partition %q: %w", in.Partition, err))
		}
		if r.Completed+r.DeadLetters > 0 || err == nil {
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

// Scheduler runs PruneAll every interval on the app clock.
type Scheduler struct {
	*periodic.Loop
}

// NewScheduler returns a stopped scheduler sleeping on sleep; onPass
// (optional) observes every pass. Start and Stop are the loop's.
func NewScheduler(p *Pruner, interval time.Duration, sleep periodic.SleepFunc, log *zap.Logger, onPass func([]PruneResult, error)) *Scheduler {
	if log == nil {
		log = zap.NewNop()
	}
	return &Scheduler{periodic.New(interval, sleep, func(ctx context.Context) {
		res, err := p.PruneAll(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("reaction prune pass failed", zap.Error(err))
		}
		for _, r := range res {
			if r.Completed+r.DeadLetters > 0 {
				log.Info("pruned reactions", zap.String("partition", r.Partition), zap.Int("completed", r.Completed),
					zap.Int("dead_letters", r.DeadLetters), zap.Bool("may_have_more", r.MayHaveMore))
			}
		}
		if onPass != nil {
			onPass(res, err)
		}
	})}
}

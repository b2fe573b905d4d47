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
	// Passed, when set, hears every scheduled pass's result (Pass).
	Passed func(err error)
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

// PruneAll prunes every registered partition (the scheduled pass and
// "syncd reactions prune"); a failing partition does not stop the
// others.
func (p *Pruner) PruneAll(ctx context.Context) ([]PruneResult, error) {
	var out []PruneResult
	err := periodic.EachPartition(ctx, p.o.Partitions, func(ctx context.Context, partition string) error {
		r, err := p.Prune(ctx, partition)
		if r.Completed+r.DeadLetters > 0 || err == nil {
			out = append(out, r)
		}
		return err
	})
	return out, err
}

// Pass is the scheduled pass: PruneAll, each partition's removals logged
// and the pass counted (the scheduler logs a failure).
func (p *Pruner) Pass(ctx context.Context) error {
	res, err := p.PruneAll(ctx)
	for _, r := range res {
		if r.Completed+r.DeadLetters > 0 {
			p.o.Log.Info("pruned reactions", zap.String("partition", r.Partition), zap.Int("completed", r.Completed),
				zap.Int("dead_letters", r.DeadLetters), zap.Bool("may_have_more", r.MayHaveMore))
		}
	}
	if p.o.Passed != nil {
		p.o.Passed(err)
	}
	return err
}

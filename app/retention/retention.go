// Package retention prunes the commit log under the normative floors of
// SPEC §4.6: the horizon never passes the minimum cursor of clients active
// within the active window, except over commits older than the age force
// limit, and the newest commits are always kept. Each pass captures the
// partition's log epoch before reading any retention input and prunes
// through ports.Pruner, which verifies that epoch and raises the horizon
// atomically with the deletions.
package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Store is the storage a prune pass needs.
type Store interface {
	ports.Pruner
	LogBounds(ctx context.Context, partition string) (ports.LogBounds, error)
	LogEpoch(ctx context.Context, partition string) (epoch string, ok bool, err error)
	ListPartitions(ctx context.Context) ([]ports.PartitionInfo, error)
}

// Policy are the §4.6 retention defaults (hosts may raise them).
type Policy struct {
	// ActiveWindow: clients whose record was updated within it hold the
	// horizon at their cursor (default 14 days).
	ActiveWindow time.Duration
	// ForceAge: commits older than this may be pruned regardless of
	// laggard cursors (default 30 days).
	ForceAge time.Duration
	// KeepCommits: the newest commits always kept (default and minimum 1000).
	KeepCommits int64
}

// Defaults of Policy.
const (
	DefaultActiveWindow = 14 * 24 * time.Hour
	DefaultForceAge     = 30 * 24 * time.Hour
	MinKeepCommits      = 1000
)

// DefaultPolicy returns the normative defaults.
func DefaultPolicy() Policy {
	return Policy{ActiveWindow: DefaultActiveWindow, ForceAge: DefaultForceAge, KeepCommits: MinKeepCommits}
}

// NoForceAge is a ForceAge that never force-prunes (a century).
const NoForceAge = 100 * 365 * 24 * time.Hour

// ToActiveFloors is the policy of tests and load runs that must see the
// horizon move under live traffic and real clients meet
// sync.cursor_expired: it prunes down to the cursor floor of the clients
// seen within activeWindow and no further (everything when none is
// active), keeps no minimum of newest commits and never force-prunes by
// age. It is below the §4.6 minimums, so it takes Options.Unfloored;
// never a production server's policy.
func ToActiveFloors(activeWindow time.Duration) Policy {
	return Policy{ActiveWindow: activeWindow, ForceAge: NoForceAge, KeepCommits: 0}
}

// Normalize fills zero fields with the defaults and raises values below the
// normative floors to them (a host may only be more conservative).
func (p Policy) Normalize() Policy {
	if p.ActiveWindow < DefaultActiveWindow {
		p.ActiveWindow = DefaultActiveWindow
	}
	if p.ForceAge < DefaultForceAge {
		p.ForceAge = DefaultForceAge
	}
	if p.KeepCommits < MinKeepCommits {
		p.KeepCommits = MinKeepCommits
	}
	return p
}

// Target computes the seq a pass may prune through from its inputs: at most
// maxSeq − keep; no further than the active cursor floor (when there is an
// active client); but at least through the commits older than the force
// age, still under the keep cap. Never negative.
func Target(maxSeq, keep int64, floor int64, hasFloor bool, forceSeq int64) int64 {
	limit := maxSeq - keep
	t := limit
	if hasFloor && floor < t {
		t = floor
	}
	if f := min(forceSeq, limit); f > t {
		t = f
	}
	return max(t, 0)
}

// Pruner runs prune passes.
type Pruner struct {
	store   Store
	policy  Policy
	now     func() time.Time
	log     *zap.Logger
	events  ports.EventSink
	metrics *Metrics
}

// Options configure a Pruner.
type Options struct {
	Store  Store
	Policy Policy
	// Unfloored takes Policy as given, below the normative floors too
	// (zero included). Only conformance hosts set it: a production
	// server must keep the §4.6 minimums.
	Unfloored bool
	// Events, when set, hears every partition's completed pass
	// (domain/event).
	Events ports.EventSink
	// Metrics, when set, counts the scheduled passes (Pass).
	Metrics *Metrics
	Now     func() time.Time
	Log     *zap.Logger
}

// New builds a Pruner (the policy is normalized).
func New(o Options) (*Pruner, error) {
	if o.Store == nil {
		return nil, errors.New("retention: Store is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	policy := o.Policy
	if !o.Unfloored {
		policy = policy.Normalize()
	}
	return &Pruner{store: o.Store, policy: policy, now: o.Now, log: o.Log, events: o.Events, metrics: o.Metrics}, nil
}

// PartitionResult is one partition's pass.
type PartitionResult struct {
	Partition string
	// Skipped is set for an unregistered partition.
	Skipped bool
	// Lag is how many commits the slowest active client is behind the
	// newest (0 without an active client).
	Lag int64
	ports.PruneResult
}

// PrunePartition runs one pass on a partition. The epoch is captured first;
// the storage refuses the prune if a restore rotated it meanwhile
// (sync.storage.prune_epoch_mismatch: recompute on the next pass). The
// prune is issued even when the horizon would not move, so an earlier
// incomplete cleanup can finish.
func (p *Pruner) PrunePartition(ctx context.Context, partition string) (PartitionResult, error) {
	res := PartitionResult{Partition: partition}
	epoch, ok, err := p.store.LogEpoch(ctx, partition)
	if err != nil {
		return res, fmt.Errorf("read log epoch: %w", err)
	}
	if !ok {
		res.Skipped = true
		return res, nil
	}
	now := p.now()
	bounds, err := p.store.LogBounds(ctx, partition)
	if err != nil {
		return res, fmt.Errorf("read log bounds: %w", err)
	}
	floor, hasFloor, err := p.store.ActiveClientCursorFloor(ctx, partition, now.Add(-p.policy.ActiveWindow).UnixMilli())
	if err != nil {
		return res, fmt.Errorf("read active client floor: %w", err)
	}
	// A client recorded without any active subscription (cursor -1) needs
	// no log; the store leaves it out of the floor, and a negative floor
	// must still never pin the horizon at zero.
	if hasFloor && floor < 0 {
		hasFloor = false
	}
	if hasFloor && floor < bounds.MaxSeq {
		res.Lag = bounds.MaxSeq - floor
	}
	forceSeq, err := p.store.CommitSeqBefore(ctx, partition, now.Add(-p.policy.ForceAge).UnixMilli())
	if err != nil {
		return res, fmt.Errorf("read force-age seq: %w", err)
	}
	through := Target(bounds.MaxSeq, p.policy.KeepCommits, floor, hasFloor, forceSeq)
	pr, err := p.store.PruneCommitsThrough(ctx, partition, ports.PruneRequest{LogEpoch: epoch, ThroughSeq: through})
	if err != nil {
		return res, fmt.Errorf("prune %q through %d: %w", partition, through, err)
	}
	res.PruneResult = pr
	if p.events != nil {
		p.events.Emit(event.PruneCompleted{Partition: partition, PreviousHorizonSeq: pr.PreviousHorizonSeq,
			HorizonSeq: pr.HorizonSeq, RemovedCommits: pr.RemovedCommits, Lag: res.Lag, Duration: p.now().Sub(now)})
	}
	return res, nil
}

// PruneAll runs one pass on every registered partition (the scheduled
// pass and "syncd prune"). An epoch mismatch on one partition is logged
// and skipped; other errors are joined.
func (p *Pruner) PruneAll(ctx context.Context) ([]PartitionResult, error) {
	var out []PartitionResult
	err := periodic.EachPartition(ctx, p.store, func(ctx context.Context, partition string) error {
		r, err := p.PrunePartition(ctx, partition)
		if syncerr.CodeOf(err) == syncerr.StoragePruneEpochMismatch {
			p.log.Info("prune skipped: log epoch rotated during the pass", zap.String("partition", partition))
			return nil
		}
		if err == nil {
			out = append(out, r)
		}
		return err
	})
	return out, err
}

// Pass is the scheduled pass: PruneAll, its summary logged and counted
// (the scheduler logs a failure).
func (p *Pruner) Pass(ctx context.Context) error {
	res, err := p.PruneAll(ctx)
	var removed int64
	for _, r := range res {
		removed += r.RemovedCommits
	}
	if removed > 0 {
		p.log.Info("pruned commit log", zap.Int("partitions", len(res)), zap.Int64("removed_commits", removed))
	}
	if ctx.Err() == nil {
		p.metrics.observe(res, err)
	}
	return err
}

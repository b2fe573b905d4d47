package leases

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/ports"
)

// Lease retention bounds.
const (
	pruneLimit     = 1000
	maxPrunePasses = 100
)

// Pruner deletes what the lease store no longer needs: leases expired
// for longer than one TTL (no outage round may use them; a live round
// issues a fresh one) and revocations older than two TTLs whose id no
// stored lease carries (after a revocation the server only mints fresh
// ids, so such an entry guards nothing).
type Pruner struct {
	store ports.LeaseStore
	ttl   time.Duration
	now   func() time.Time
}

// NewPruner builds a Pruner for leases of the given TTL.
func NewPruner(store ports.LeaseStore, ttl time.Duration, now func() time.Time) (*Pruner, error) {
	if store == nil || ttl <= 0 || now == nil {
		return nil, errors.New("leases: the pruner needs a store, a positive TTL and a clock")
	}
	return &Pruner{store: store, ttl: ttl, now: now}, nil
}

// Prune runs bounded passes until one reports nothing more (at most 100)
// and returns what they removed.
func (p *Pruner) Prune(ctx context.Context) (ports.LeasePruneCounts, error) {
	now := p.now()
	q := ports.LeasePrune{ExpiredBeforeMs: now.Add(-p.ttl).UnixMilli(), RevokedBeforeMs: now.Add(-2 * p.ttl).UnixMilli(), Limit: pruneLimit}
	var total ports.LeasePruneCounts
	for range maxPrunePasses {
		n, err := p.store.PruneLeases(ctx, q)
		if err != nil {
			return total, fmt.Errorf("prune leases: %w", err)
		}
		total.Leases += n.Leases
		total.Revocations += n.Revocations
		total.MayHaveMore = n.MayHaveMore
		if !n.MayHaveMore {
			break
		}
	}
	return total, nil
}

// NewPruneScheduler runs Prune every interval on the app clock's sleep.
func NewPruneScheduler(p *Pruner, interval time.Duration, sleep periodic.SleepFunc, log *zap.Logger) *periodic.Loop {
	if log == nil {
		log = zap.NewNop()
	}
	return periodic.New(interval, sleep, func(ctx context.Context) {
		n, err := p.Prune(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("lease prune pass failed", zap.Error(err))
		}
		if n.Leases+n.Revocations > 0 {
			log.Info("pruned auth leases", zap.Int("leases", n.Leases), zap.Int("revocations", n.Revocations))
		}
	})
}

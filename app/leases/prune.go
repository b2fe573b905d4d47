package leases

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

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
	log   *zap.Logger
}

// NewPruner builds a Pruner for leases of the given TTL, logging its
// removals on log (nil: nowhere).
func NewPruner(store ports.LeaseStore, ttl time.Duration, now func() time.Time, log *zap.Logger) (*Pruner, error) {
	if store == nil || ttl <= 0 || now == nil {
		return nil, errors.New("leases: the pruner needs a store, a positive TTL and a clock")
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Pruner{store: store, ttl: ttl, now: now, log: log}, nil
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

// Pass is the scheduled pass: Prune, its removals logged (the scheduler
// logs a failure).
func (p *Pruner) Pass(ctx context.Context) error {
	n, err := p.Prune(ctx)
	if n.Leases+n.Revocations > 0 {
		p.log.Info("pruned auth leases", zap.Int("leases", n.Leases), zap.Int("revocations", n.Revocations))
	}
	return err
}

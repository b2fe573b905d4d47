package memory

import (
	"context"
	"slices"
	"sort"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

var (
	_ ports.ReactionQueue  = (*Store)(nil)
	_ ports.ReactionLister = (*Store)(nil)
)

// withReactions runs fn on the partition's reactions under its write lock.
func (s *Store) withReactions(ctx context.Context, name string, fn func(rs map[string]*ports.StoredReaction)) error {
	return s.withPartition(ctx, name, func(p *partition) error {
		fn(p.d.reactions)
		return nil
	})
}

// ClaimReactions leases due reactions for one worker.
func (s *Store) ClaimReactions(ctx context.Context, name string, q ports.ReactionClaim) ([]ports.StoredReaction, error) {
	if len(q.Types) == 0 || q.Limit <= 0 {
		return nil, s.open()
	}
	var out []ports.StoredReaction
	err := s.withReactions(ctx, name, func(rs map[string]*ports.StoredReaction) {
		type cand struct {
			r   *ports.StoredReaction
			due int64
		}
		var cands []cand
		for _, r := range rs {
			if !slices.Contains(q.Types, r.Type) {
				continue
			}
			switch {
			case r.Status == ports.ReactionPending && r.AvailableAtMs <= q.NowMs:
				cands = append(cands, cand{r, r.AvailableAtMs})
			case r.Status == ports.ReactionLeased && r.LeaseExpiresAt <= q.NowMs:
				cands = append(cands, cand{r, r.LeaseExpiresAt})
			}
		}
		sort.Slice(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			if a.due != b.due {
				return a.due < b.due
			}
			if a.r.Source.CreatedAtMs != b.r.Source.CreatedAtMs {
				return a.r.Source.CreatedAtMs < b.r.Source.CreatedAtMs
			}
			return a.r.IdempotencyKey < b.r.IdempotencyKey
		})
		if len(cands) > q.Limit {
			cands = cands[:q.Limit]
		}
		for _, c := range cands {
			n := *c.r
			n.Status, n.Attempts = ports.ReactionLeased, n.Attempts+1
			n.LeaseOwner, n.LeaseExpiresAt, n.CompletedAtMs = q.LeaseOwner, q.NowMs+q.LeaseDurationMs, 0
			rs[n.IdempotencyKey] = &n
			out = append(out, copyReaction(n))
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source.CreatedAtMs != out[j].Source.CreatedAtMs {
			return out[i].Source.CreatedAtMs < out[j].Source.CreatedAtMs
		}
		return out[i].IdempotencyKey < out[j].IdempotencyKey
	})
	return out, err
}

// leased applies fn to a reaction leased by owner; it reports whether it did.
func (s *Store) leased(ctx context.Context, name, key, owner string, fn func(n *ports.StoredReaction)) (bool, error) {
	ok := false
	err := s.withReactions(ctx, name, func(rs map[string]*ports.StoredReaction) {
		r := rs[key]
		if r == nil || r.Status != ports.ReactionLeased || r.LeaseOwner != owner {
			return
		}
		n := *r
		fn(&n)
		rs[key] = &n
		ok = true
	})
	return ok, err
}

// CompleteReaction acknowledges a leased reaction.
func (s *Store) CompleteReaction(ctx context.Context, name, key, owner string, completedAtMs int64) (bool, error) {
	return s.leased(ctx, name, key, owner, func(n *ports.StoredReaction) {
		n.Status, n.CompletedAtMs, n.LeaseOwner, n.LeaseExpiresAt = ports.ReactionCompleted, completedAtMs, "", 0
	})
}

// ExtendReactionLease moves a held lease's expiry.
func (s *Store) ExtendReactionLease(ctx context.Context, name, key, owner string, expiresAtMs int64) (bool, error) {
	return s.leased(ctx, name, key, owner, func(n *ports.StoredReaction) { n.LeaseExpiresAt = expiresAtMs })
}

// FailReaction retries or dead-letters a leased reaction.
func (s *Store) FailReaction(ctx context.Context, name, key string, f ports.ReactionFailure) (bool, error) {
	return s.leased(ctx, name, key, f.LeaseOwner, func(n *ports.StoredReaction) {
		n.Status, n.AvailableAtMs = ports.ReactionDeadLetter, f.AtMs
		if f.Retry {
			n.Status, n.AvailableAtMs = ports.ReactionPending, f.RetryAtMs
		}
		n.LastFailure, n.LeaseOwner, n.LeaseExpiresAt = slices.Clone(f.Failure), "", 0
	})
}

// RetryReaction resets a dead letter to pending.
func (s *Store) RetryReaction(ctx context.Context, name, key string, nowMs int64) (bool, error) {
	ok := false
	err := s.withReactions(ctx, name, func(rs map[string]*ports.StoredReaction) {
		r := rs[key]
		if r == nil || r.Status != ports.ReactionDeadLetter {
			return
		}
		n := *r
		n.Status, n.Attempts, n.AvailableAtMs = ports.ReactionPending, 0, nowMs
		n.LastFailure, n.LeaseOwner, n.LeaseExpiresAt, n.CompletedAtMs = nil, "", 0, 0
		rs[key] = &n
		ok = true
	})
	return ok, err
}

// PruneReactions deletes aged terminal reactions.
func (s *Store) PruneReactions(ctx context.Context, name string, q ports.ReactionPrune) (ports.ReactionPruneCounts, error) {
	var out ports.ReactionPruneCounts
	if q.Limit <= 0 {
		return out, s.open()
	}
	err := s.withReactions(ctx, name, func(rs map[string]*ports.StoredReaction) {
		type cand struct {
			key string
			at  int64
			dl  bool
		}
		var cands []cand
		for k, r := range rs {
			switch {
			case r.Status == ports.ReactionCompleted && r.CompletedAtMs < q.CompletedBeforeMs:
				cands = append(cands, cand{k, r.CompletedAtMs, false})
			case r.Status == ports.ReactionDeadLetter && r.AvailableAtMs < q.DeadLetterBeforeMs:
				cands = append(cands, cand{k, r.AvailableAtMs, true})
			}
		}
		sort.Slice(cands, func(i, j int) bool {
			if cands[i].at != cands[j].at {
				return cands[i].at < cands[j].at
			}
			return cands[i].key < cands[j].key
		})
		if len(cands) > q.Limit {
			cands = cands[:q.Limit]
		}
		out.MayHaveMore = len(cands) == q.Limit
		for _, c := range cands {
			delete(rs, c.key)
			if c.dl {
				out.DeadLetter++
			} else {
				out.Completed++
			}
		}
	})
	return out, err
}

// ListReactionPage pages reactions by (created time, key) with filters.
func (s *Store) ListReactionPage(ctx context.Context, name string, q ports.ReactionListQuery) ([]ports.StoredReaction, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if q.Limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "limit %d", q.Limit)
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return nil, nil
	}
	var out []ports.StoredReaction
	for _, r := range p.d.reactions {
		if len(q.Statuses) > 0 && !slices.Contains(q.Statuses, r.Status) || len(q.Types) > 0 && !slices.Contains(q.Types, r.Type) {
			continue
		}
		if a := q.After; a != nil && (r.Source.CreatedAtMs < a.CreatedAtMs ||
			r.Source.CreatedAtMs == a.CreatedAtMs && r.IdempotencyKey <= a.IdempotencyKey) {
			continue
		}
		out = append(out, copyReaction(*r))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source.CreatedAtMs != out[j].Source.CreatedAtMs {
			return out[i].Source.CreatedAtMs < out[j].Source.CreatedAtMs
		}
		return out[i].IdempotencyKey < out[j].IdempotencyKey
	})
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

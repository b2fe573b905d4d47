package sqlstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/syncd-dev/syncd/ports"
)

var _ ports.ReactionQueue = (*Store)(nil)

// ClaimReactions implements ports.ReactionQueue.
func (s *Store) ClaimReactions(ctx context.Context, partition string, q ports.ReactionClaim) ([]ports.StoredReaction, error) {
	if len(q.Types) == 0 || q.Limit <= 0 {
		return nil, nil
	}
	var out []ports.StoredReaction
	err := s.writeTx(ctx, "claim reactions", "", func(tx WriteTx) error {
		out = out[:0]
		args := append([]any{partition}, anyStrings(q.Types)...)
		args = append(args, q.NowMs, q.NowMs, q.Limit)
		rows, err := tx.QueryContext(ctx, s.q(`SELECT idempotency_key FROM sync_reactions
WHERE partition=? AND type IN (`+placeholders(len(q.Types))+`)
  AND ((status='pending' AND available_at_ms<=?) OR (status='leased' AND lease_expires_at_ms<=?))
ORDER BY CASE WHEN status='pending' THEN available_at_ms ELSE lease_expires_at_ms END, created_at_ms, `+
			s.d.ByteOrder("idempotency_key")+` LIMIT ?`+s.d.LockRows()), args...)
		if err != nil {
			return err
		}
		var keys []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				_ = rows.Close()
				return err
			}
			keys = append(keys, k)
		}
		if err := rows.Close(); err != nil || len(keys) == 0 {
			return err
		}
		in := placeholders(len(keys))
		args = append([]any{q.LeaseOwner, q.NowMs + q.LeaseDurationMs, partition}, anyStrings(keys)...)
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE sync_reactions SET status='leased', attempts=attempts+1,
lease_owner=?, lease_expires_at_ms=?, completed_at_ms=NULL WHERE partition=? AND idempotency_key IN (`+in+`)`), args...); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, s.q("SELECT "+reactionCols+" FROM sync_reactions WHERE partition=? AND idempotency_key IN ("+in+")"),
			append([]any{partition}, anyStrings(keys)...)...)
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			r, err := scanReaction(rows)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source.CreatedAtMs != out[j].Source.CreatedAtMs {
			return out[i].Source.CreatedAtMs < out[j].Source.CreatedAtMs
		}
		return out[i].IdempotencyKey < out[j].IdempotencyKey
	})
	return out, nil
}

// reactionCAS runs one update guarded by the statement's own WHERE clause
// and reports whether it matched.
func (s *Store) reactionCAS(ctx context.Context, op, query string, args ...any) (bool, error) {
	var ok bool
	err := s.writeOne(ctx, op, func(tx Querier) error {
		res, err := tx.ExecContext(ctx, s.q(query), args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return err
	})
	return ok, err
}

// CompleteReaction implements ports.ReactionQueue.
func (s *Store) CompleteReaction(ctx context.Context, partition, key, leaseOwner string, completedAtMs int64) (bool, error) {
	return s.reactionCAS(ctx, "complete reaction", `UPDATE sync_reactions SET status='completed', completed_at_ms=?,
lease_owner=NULL, lease_expires_at_ms=NULL WHERE partition=? AND idempotency_key=? AND status='leased' AND lease_owner=?`,
		completedAtMs, partition, key, leaseOwner)
}

// ExtendReactionLease implements ports.ReactionQueue.
func (s *Store) ExtendReactionLease(ctx context.Context, partition, key, leaseOwner string, leaseExpiresAtMs int64) (bool, error) {
	return s.reactionCAS(ctx, "extend reaction lease", `UPDATE sync_reactions SET lease_expires_at_ms=?
WHERE partition=? AND idempotency_key=? AND status='leased' AND lease_owner=?`,
		leaseExpiresAtMs, partition, key, leaseOwner)
}

// FailReaction implements ports.ReactionQueue.
func (s *Store) FailReaction(ctx context.Context, partition, key string, f ports.ReactionFailure) (bool, error) {
	status, at := string(ports.ReactionDeadLetter), f.AtMs
	if f.Retry {
		status, at = string(ports.ReactionPending), f.RetryAtMs
	}
	var failure any
	if f.Failure != nil {
		failure = string(f.Failure)
	}
	return s.reactionCAS(ctx, "fail reaction", `UPDATE sync_reactions SET status=?, available_at_ms=?, last_failure=?,
lease_owner=NULL, lease_expires_at_ms=NULL WHERE partition=? AND idempotency_key=? AND status='leased' AND lease_owner=?`,
		status, at, failure, partition, key, f.LeaseOwner)
}

// RetryReaction implements ports.ReactionQueue.
func (s *Store) RetryReaction(ctx context.Context, partition, key string, nowMs int64) (bool, error) {
	return s.reactionCAS(ctx, "retry reaction", `UPDATE sync_reactions SET status='pending', attempts=0, available_at_ms=?,
last_failure=NULL, lease_owner=NULL, lease_expires_at_ms=NULL, completed_at_ms=NULL
WHERE partition=? AND idempotency_key=? AND status='dead-letter'`, nowMs, partition, key)
}

// PruneReactions implements ports.ReactionQueue.
func (s *Store) PruneReactions(ctx context.Context, partition string, q ports.ReactionPrune) (ports.ReactionPruneCounts, error) {
	var out ports.ReactionPruneCounts
	if q.Limit <= 0 {
		return out, nil
	}
	err := s.writeTx(ctx, "prune reactions", "", func(tx WriteTx) error {
		out = ports.ReactionPruneCounts{}
		// The selected rows are locked (PostgreSQL; SQLite's one writer
		// serializes anyway), so an operator retry racing this pass either
		// waits for the delete and finds nothing, or committed first and
		// its row no longer qualifies: never both.
		rows, err := tx.QueryContext(ctx, s.q(`SELECT idempotency_key, status FROM sync_reactions
WHERE partition=? AND ((status='completed' AND completed_at_ms<?) OR (status='dead-letter' AND available_at_ms<?))
ORDER BY CASE WHEN status='completed' THEN completed_at_ms ELSE available_at_ms END, `+s.d.ByteOrder("idempotency_key")+` LIMIT ?`+s.d.LockRows()),
			partition, q.CompletedBeforeMs, q.DeadLetterBeforeMs, q.Limit)
		if err != nil {
			return err
		}
		var keys []string
		for rows.Next() {
			var k, st string
			if err := rows.Scan(&k, &st); err != nil {
				_ = rows.Close()
				return err
			}
			keys = append(keys, k)
			if st == string(ports.ReactionCompleted) {
				out.Completed++
			} else {
				out.DeadLetter++
			}
		}
		if err := rows.Close(); err != nil || len(keys) == 0 {
			return err
		}
		out.MayHaveMore = len(keys) == q.Limit
		_, err = tx.ExecContext(ctx, s.q("DELETE FROM sync_reactions WHERE partition=? AND idempotency_key IN ("+placeholders(len(keys))+")"),
			append([]any{partition}, anyStrings(keys)...)...)
		if err != nil {
			return fmt.Errorf("prune reactions: %w", err)
		}
		return nil
	})
	return out, err
}

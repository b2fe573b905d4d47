package reactions

import (
	"context"
	"fmt"

	"github.com/syncd-dev/syncd/ports"
)

// listPage is the page size of the operator reads.
const listPage = 500

// List returns up to limit reactions of the partition matching q's
// filters, from q.After on, reading pages of at most 500.
func List(ctx context.Context, l ports.ReactionLister, partition string, q ports.ReactionListQuery, limit int) ([]ports.StoredReaction, error) {
	var out []ports.StoredReaction
	for len(out) < limit {
		q.Limit = min(listPage, limit-len(out))
		page, err := l.ListReactionPage(ctx, partition, q)
		if err != nil {
			return out, fmt.Errorf("list reactions: %w", err)
		}
		out = append(out, page...)
		if len(page) < q.Limit {
			break
		}
		last := page[len(page)-1]
		q.After = &ports.ReactionCursor{CreatedAtMs: last.Source.CreatedAtMs, IdempotencyKey: last.IdempotencyKey}
	}
	return out, nil
}

// RetryResult reports a bulk operator retry.
type RetryResult struct {
	Partition string
	// Retried were reset to pending; Skipped were dead letters when
	// listed but no longer when retried (pruned, or retried by another
	// operator meanwhile).
	Retried, Skipped int
}

// RetryDeadLetters resets every dead letter of the partition (of types,
// when given) to pending, due at nowMs (SPEC §6.9 retryDeadLetterReaction).
// It lists the dead letters first and then retries them, so a reaction
// that fails again while the pass runs is not retried twice.
func RetryDeadLetters(ctx context.Context, q ports.ReactionQueue, l ports.ReactionLister, partition string, types []string, nowMs int64) (RetryResult, error) {
	res := RetryResult{Partition: partition}
	var keys []string
	lq := ports.ReactionListQuery{Statuses: []ports.ReactionStatus{ports.ReactionDeadLetter}, Types: types, Limit: listPage}
	for {
		page, err := l.ListReactionPage(ctx, partition, lq)
		if err != nil {
			return res, fmt.Errorf("list dead letters: %w", err)
		}
		for _, r := range page {
			keys = append(keys, r.IdempotencyKey)
		}
		if len(page) < lq.Limit {
			break
		}
		last := page[len(page)-1]
		lq.After = &ports.ReactionCursor{CreatedAtMs: last.Source.CreatedAtMs, IdempotencyKey: last.IdempotencyKey}
	}
	for _, k := range keys {
		ok, err := q.RetryReaction(ctx, partition, k, nowMs)
		if err != nil {
			return res, fmt.Errorf("retry reaction: %w", err)
		}
		if ok {
			res.Retried++
		} else {
			res.Skipped++
		}
	}
	return res, nil
}

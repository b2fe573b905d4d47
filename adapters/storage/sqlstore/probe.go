package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// scopePinValues is how many values one scope-pin statement seeks.
const scopePinValues = 64

// LatestScopedChange implements ports.LogReader: one index seek per value
// (the newest entry of (partition, table, variable, value) at or below
// the bound), the largest of them.
func (s *Store) LatestScopedChange(ctx context.Context, partition string, q ports.ScopedChangeQuery) (int64, error) {
	if len(q.Values) == 0 {
		return 0, syncerr.Newf(syncerr.StorageScanRequiresScope, "scope pin of %q without values", q.Table)
	}
	values := dedupe(q.Values)
	var best int64
	for len(values) > 0 {
		n := min(len(values), scopePinValues)
		seq, err := s.latestScopedChange(ctx, partition, q, values[:n])
		if err != nil {
			return 0, internal("read scope pin", err)
		}
		best = max(best, seq)
		values = values[n:]
	}
	return best, nil
}

func (s *Store) latestScopedChange(ctx context.Context, partition string, q ports.ScopedChangeQuery, values []string) (int64, error) {
	one := "SELECT (SELECT commit_seq FROM sync_change_scopes WHERE partition=? AND tbl=? AND var=? AND value=? AND commit_seq<=? ORDER BY commit_seq DESC LIMIT 1) AS k"
	parts := make([]string, len(values))
	args := make([]any, 0, 5*len(values))
	for i, v := range values {
		parts[i] = one
		args = append(args, partition, q.Table, q.Variable, v, q.ThroughSeq)
	}
	var seq sql.NullInt64
	err := s.rd.QueryRowContext(ctx, s.q("SELECT MAX(k) FROM ("+strings.Join(parts, " UNION ALL ")+") seeks"), args...).Scan(&seq)
	return seq.Int64, err
}

// probeBatch is how many candidate commits one probe statement reads.
const probeBatch = 2048

// ProbeCommitWindow implements ports.LogReader: the window's candidates
// from the change-scope index joined to the table's changes, reading only
// their op and stored scopes, page by page.
func (s *Store) ProbeCommitWindow(ctx context.Context, partition string, p ports.WindowProbe) (ports.WindowSummary, error) {
	out, err := s.probeCommitWindow(ctx, partition, p)
	return out, internal("probe commit window", err)
}

func (s *Store) probeCommitWindow(ctx context.Context, partition string, p ports.WindowProbe) (ports.WindowSummary, error) {
	var sum ports.WindowSummary
	drive, err := drivingVariable(p.ScopeFilter)
	if err != nil {
		return sum, err
	}
	if p.Limit < 0 {
		return sum, syncerr.Newf(syncerr.StorageInvalidLimit, "window probe limit %d", p.Limit)
	}
	values := dedupe(p.ScopeFilter[drive])
	if len(values) == 0 || p.ThroughSeq <= p.AfterSeq {
		return sum, nil
	}
	query := s.q(fmt.Sprintf(`SELECT c.k, ch.op, ch.scopes FROM (%s) c
JOIN sync_changes ch ON ch.partition=? AND ch.commit_seq=c.k AND ch.tbl=?
ORDER BY c.k`, candidates("sync_change_scopes", "commit_seq", " AND commit_seq>? AND commit_seq<=?", len(values))))
	in := interner{}
	after := p.AfterSeq
	for {
		args := candidateArgs([]any{partition, p.Table, drive}, values, []any{after, p.ThroughSeq}, probeBatch)
		args = append(args, partition, p.Table)
		last, n, err := s.probePage(ctx, query, args, p, in, &sum)
		if err != nil || n < probeBatch || (sum.Changes > p.Limit && sum.Deletes) {
			return sum, err
		}
		after = last
	}
}

// CountWindowChanges implements ports.WindowChangeCounter: a range of the
// covering index on (partition, commit_seq, tbl), stopping at the limit.
func (s *Store) CountWindowChanges(ctx context.Context, partition string, p ports.WindowProbe) (int, error) {
	if p.Limit < 0 {
		return 0, syncerr.Newf(syncerr.StorageInvalidLimit, "window count limit %d", p.Limit)
	}
	if p.ThroughSeq <= p.AfterSeq {
		return 0, nil
	}
	var n int
	err := s.rd.QueryRowContext(ctx, s.q(`SELECT count(*) FROM (SELECT 1 FROM sync_changes
WHERE partition=? AND commit_seq>? AND commit_seq<=? AND tbl=? LIMIT ?) w`),
		partition, p.AfterSeq, p.ThroughSeq, p.Table, p.Limit+1).Scan(&n)
	return n, internal("count window changes", err)
}

var _ ports.WindowChangeCounter = (*Store)(nil)

// probePage folds one page of candidate commits into sum (the candidates
// are limited, not the join: every commit arrives with all its changes to
// the table); it returns the last candidate and how many there were.
func (s *Store) probePage(ctx context.Context, query string, args []any, p ports.WindowProbe, in interner, sum *ports.WindowSummary) (last int64, n int, err error) {
	rows, err := s.rd.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = rows.Close() }()
	var seq, op int64
	var scopes sql.RawBytes
	last = -1
	for rows.Next() {
		if err := rows.Scan(&seq, &op, &scopes); err != nil {
			return 0, n, err
		}
		if seq != last {
			last = seq
			n++
		}
		m, err := decodeScopesIn(scopes, in)
		if err != nil {
			return 0, n, err
		}
		if matches(m, p.ScopeFilter) {
			sum.Changes = min(sum.Changes+1, p.Limit+1)
			sum.Deletes = sum.Deletes || commit.Op(op) == commit.OpDelete
		}
	}
	return last, n, rows.Err()
}

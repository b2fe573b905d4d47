package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// LogBounds implements ports.LogReader.
func (s *Store) LogBounds(ctx context.Context, partition string) (ports.LogBounds, error) {
	var b ports.LogBounds
	_, err := scanOne(s.rd.QueryRowContext(ctx, s.q("SELECT max_commit_seq, horizon_seq FROM sync_partitions WHERE partition=?"), partition),
		&b.MaxSeq, &b.HorizonSeq)
	return b, internal("read log bounds", err)
}

// ReadCommitWindow implements ports.LogReader: candidates come from the
// change-scope inverted index, one statement per page joined to the commit
// metadata and the table's changes; where the candidates are dense (at
// least every other seq), the following pages read the seq range instead.
func (s *Store) ReadCommitWindow(ctx context.Context, partition string, w ports.CommitWindow) ([]commit.Commit, error) {
	out, err := s.readCommitWindow(ctx, s.rd, partition, w)
	return out, internal("read commit window", err)
}

func (s *Store) readCommitWindow(ctx context.Context, q Querier, partition string, w ports.CommitWindow) ([]commit.Commit, error) {
	drive, err := drivingVariable(w.ScopeFilter)
	if err != nil {
		return nil, err
	}
	if w.LimitChanges < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "commit window limit %d", w.LimitChanges)
	}
	values := dedupe(w.ScopeFilter[drive])
	if len(values) == 0 || w.ThroughSeq <= w.AfterSeq {
		return nil, nil
	}
	query := s.windowQuery(len(values))
	batch := max(windowProbe, w.LimitChanges)
	// A large read of a long window starts with a probe page: a catch-up
	// over one busy scope has a candidate at nearly every seq, and its
	// commits are then cheaper to read by the seq range (one ordered scan
	// of the changes) than by seeking each candidate's header and changes.
	// A small read is one page either way.
	page := batch
	if w.LimitChanges >= windowProbeFrom && w.ThroughSeq-w.AfterSeq > windowProbe {
		page = windowProbe
	}
	r := windowRead{w: w, after: w.AfterSeq}
	// Sized up front for a short read, and once more when the probe finds
	// the window dense (grown by doubling, a 1,000-commit read copied its
	// commits and changes about twice over).
	r.out = make([]commit.Commit, 0, windowPresize(w))
	r.arena.changes = make([]commit.Change, 0, windowPresize(w))
	dense := false
	perSeq := 1.0 // delivered changes per seq of the last page
	for r.delivered < w.LimitChanges && r.after < w.ThroughSeq {
		from, kept, had := r.after, len(r.out), r.delivered
		if dense {
			// The range the last page's density says the rest needs.
			span := int64(math.Ceil(float64(w.LimitChanges-r.delivered) / perSeq))
			through := min(w.ThroughSeq, r.after+max(windowProbe, span))
			heads, err := s.windowHeads(ctx, q, partition, r.after, through)
			if err != nil {
				return nil, err
			}
			rangeArgs := []any{partition, w.Table, r.after, through}
			var done bool
			if s.direct != nil {
				done, err = s.windowRangeDirect(ctx, rangeArgs, &heads, &r)
			} else {
				_, done, err = s.windowPage(ctx, q, s.windowRangeQuery(), rangeArgs, &heads, &r)
			}
			if err != nil {
				return nil, err
			}
			if done {
				break
			}
			// A range stays dense while at least half its seqs are
			// delivered commits; otherwise the candidates are sparse again.
			dense = 2*(len(r.out)-kept) >= int(through-from)
			perSeq = float64(r.delivered-had) / float64(through-from)
			r.after = through
			continue
		}
		args := candidateArgs([]any{partition, w.Table, drive}, values, []any{r.after, w.ThroughSeq}, page)
		args = append(args, partition, partition, w.Table)
		cands, done, err := s.windowPage(ctx, q, query, args, nil, &r)
		if err != nil {
			return nil, err
		}
		if done || cands < page {
			break
		}
		dense = 2*(len(r.out)-kept) >= int(r.after-from)
		perSeq = float64(r.delivered-had) / float64(r.after-from)
		page = batch
		if dense {
			r.reserve(min(w.LimitChanges-r.delivered, int(math.Ceil(float64(w.ThroughSeq-r.after)*perSeq))))
		}
	}
	if len(r.out) == 0 {
		return nil, nil // an empty window is nil, whatever was reserved
	}
	return r.out, nil
}

// windowRead is the state of one window read across its pages: the
// commits delivered so far, their changes, the cursor (the last seq a
// page saw) and the arena the changes live in.
type windowRead struct {
	w         ports.CommitWindow
	out       []commit.Commit
	delivered int
	after     int64
	arena     pageArena
}

// windowPresize is what a window read's commits and changes are first
// sized for: the change limit, if the window is that long, and no more
// than a short read needs, so that a large limit over a sparse window
// does not reserve what it never fills.
func windowPresize(w ports.CommitWindow) int {
	return int(max(0, min(int64(w.LimitChanges), w.ThroughSeq-w.AfterSeq, windowPresizeMax)))
}

const windowPresizeMax = 256

// reserve makes room for n more changes (and as many commits), the most a
// dense window's rest delivers.
func (r *windowRead) reserve(n int) {
	n = min(max(n, 0), r.w.LimitChanges)
	r.out = slices.Grow(r.out, n)
	r.arena.changes = slices.Grow(r.arena.changes, n)
}

// windowProbe is the candidate page that probes a long window's density,
// and the least page or range read; windowProbeFrom is the least change
// limit worth a probe.
const (
	windowProbe     = 64
	windowProbeFrom = 4 * windowProbe
)

// windowRangeQuery reads a dense window's table changes by seq range over
// the changes' primary key, in (seq, idx) order, without their commits'
// header (windowHeads reads it by the same range: two ordered range reads
// instead of a seek per change); its args are partition, table, after,
// through. That order is the primary key's own (no sort on either
// engine), so the rows need not carry idx: one column fewer per change
// is a few percent of a catch-up's CPU on SQLite, where every column
// value is several driver calls. windowPage applies the full scope
// filter.
func (s *Store) windowRangeQuery() string {
	return s.q(`SELECT commit_seq, row_id, op, row_version, scopes, payload
FROM sync_changes
WHERE partition=? AND tbl=? AND commit_seq>? AND commit_seq<=?
ORDER BY commit_seq, idx`)
}

// windowHead is what a window commit carries of its header.
type windowHead struct {
	seq, created int64
	actor        string
}

// windowHeads reads the headers of the commits in (after, through], in
// seq order (through the direct reader when the engine has one).
func (s *Store) windowHeads(ctx context.Context, q Querier, partition string, after, through int64) ([]windowHead, error) {
	out := make([]windowHead, 0, min(through-after, 4096))
	if s.direct != nil {
		err := s.direct.ReadDirect(ctx, s.windowHeadsQuery(), []any{partition, after, through}, func(row DirectRow) error {
			var h windowHead
			h.seq, _ = row.Int64(0)
			h.actor = string(row.Bytes(1))
			h.created, _ = row.Int64(2)
			out = append(out, h)
			return nil
		})
		return out, err
	}
	rows, err := q.QueryContext(ctx, s.windowHeadsQuery(), partition, after, through)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var h windowHead
		if err := rows.Scan(&h.seq, &h.actor, &h.created); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func (s *Store) windowHeadsQuery() string {
	return s.q(`SELECT commit_seq, actor_id, created_at_ms FROM sync_commits
WHERE partition=? AND commit_seq>? AND commit_seq<=? ORDER BY commit_seq`)
}

// windowQuery is the commit-window page statement for nvals driving
// values; its args are candidateArgs(partition, table, var; values; after,
// through; batch) then partition, partition, table.
func (s *Store) windowQuery(nvals int) string {
	// Ordered by the candidate key only: both engines then keep the
	// candidates' index order through the nested loop instead of sorting
	// every change row, payload included, by (seq, idx); windowPage puts a
	// commit's changes in idx order itself.
	return s.q(fmt.Sprintf(`SELECT c.k, m.actor_id, m.created_at_ms,
  ch.idx, ch.row_id, ch.op, ch.row_version, ch.scopes, ch.payload
FROM (%s) c
LEFT JOIN sync_commits m ON m.partition=? AND m.commit_seq=c.k
LEFT JOIN sync_changes ch ON ch.partition=? AND ch.commit_seq=c.k AND ch.tbl=?
ORDER BY c.k`, candidates("sync_change_scopes", "commit_seq", " AND commit_seq>? AND commit_seq<=?", nvals)))
}

// windowPage folds one page: rows arrive ordered by seq (a candidate
// page's commit changes in any order, put in idx order before the commit
// is kept; a range read's in idx order); every candidate advances the
// cursor, even one whose changes all fail the full filter. Scopes and
// payload are scanned as sql.RawBytes (no database/sql clone). A range
// read's rows (ranged not nil) carry no header columns: the headers come
// from *ranged, read by the same range in seq order.
func (s *Store) windowPage(ctx context.Context, q Querier, query string, args []any, ranged *[]windowHead, r *windowRead) (cands int, done bool, err error) {
	f := newPageFold(r, ranged)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = rows.Close() }()
	var row windowRow
	var scopes, payload sql.RawBytes
	for rows.Next() {
		if ranged != nil {
			err = rows.Scan(&row.seq, &row.rowID, &row.op, &row.rowVersion, &scopes, &payload)
		} else {
			err = rows.Scan(&row.seq, &row.actor, &row.created, &row.idx, &row.rowID, &row.op, &row.rowVersion, &scopes, &payload)
		}
		if err != nil {
			return f.cands, false, err
		}
		row.scopes, row.payload = scopes, payload
		if done, err := f.add(&row); done || err != nil {
			return f.cands, done, err
		}
	}
	if err := rows.Err(); err != nil {
		return f.cands, false, err
	}
	return f.cands, f.flush(), nil
}

// windowRangeDirect is windowPage's range read through the direct
// reader: the same fold over borrowed column values.
func (s *Store) windowRangeDirect(ctx context.Context, args []any, heads *[]windowHead, r *windowRead) (done bool, err error) {
	f := newPageFold(r, heads)
	var row windowRow
	err = s.direct.ReadDirect(ctx, s.windowRangeQuery(), args, func(d DirectRow) error {
		row.seq, _ = d.Int64(0)
		id := d.Bytes(1)
		row.rowID = sql.NullString{String: string(id), Valid: id != nil}
		row.op.Int64, row.op.Valid = d.Int64(2)
		row.rowVersion.Int64, row.rowVersion.Valid = d.Int64(3)
		row.scopes = d.Bytes(4)
		// An empty payload is no payload, as database/sql scans it.
		if row.payload = d.Bytes(5); len(row.payload) == 0 {
			row.payload = nil
		}
		stop, err := f.add(&row)
		if stop && err == nil {
			return errWindowFull
		}
		return err
	})
	if errors.Is(err, errWindowFull) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return f.flush(), nil
}

// errWindowFull stops a direct read once the window has its changes.
var errWindowFull = errors.New("sqlstore: window full")

// windowRow is one change row of a window page, as either read fills it;
// scopes and payload are borrowed from the driver until the next row.
type windowRow struct {
	seq                          int64
	actor, rowID                 sql.NullString
	created, idx, op, rowVersion sql.NullInt64
	scopes, payload              []byte
}

// pageFold builds a page's commits from its rows. The scopes are decoded
// straight from the driver's bytes with interned variables and values,
// once per run of equal scopes (a run of commits to one scope shares one
// read-only map and its match), and a delivered upsert's payload is
// copied once, into the read's arena. The commit header columns repeat
// on every change row of a commit and are converted only on its first
// row.
type pageFold struct {
	r          *windowRead
	heads      []windowHead
	ranged     bool
	cands      int
	cur        commit.Commit
	order      byIdx
	have       bool
	curSeq     int64
	first      int // r.arena.changes[first:] are the current commit's
	in         interner
	lastScopes []byte
	lastMap    map[string]string
	lastMatch  bool
}

func newPageFold(r *windowRead, ranged *[]windowHead) *pageFold {
	f := &pageFold{r: r, ranged: ranged != nil, curSeq: -1, first: len(r.arena.changes), in: interner{}}
	if ranged != nil {
		f.heads = *ranged
	}
	return f
}

// flush keeps the current commit if it has changes; it reports the
// window's change limit reached.
func (f *pageFold) flush() bool {
	r, arena := f.r, &f.r.arena
	if f.have && len(arena.changes) > f.first {
		f.cur.Changes = arena.changes[f.first:len(arena.changes):len(arena.changes)]
		f.order.changes = f.cur.Changes
		// A range read's rows come in idx order already.
		if !f.ranged && !sort.IsSorted(f.order) {
			sort.Sort(f.order)
		}
		r.out = append(r.out, f.cur)
		r.delivered += len(f.cur.Changes)
	}
	f.cur, f.have = commit.Commit{}, false
	f.order.idx = f.order.idx[:0]
	f.first = len(arena.changes)
	return r.delivered >= r.w.LimitChanges
}

// add folds one row; done reports the change limit reached before it.
func (f *pageFold) add(row *windowRow) (done bool, err error) {
	r, arena := f.r, &f.r.arena
	if f.ranged && row.seq != f.curSeq {
		// The header from the range's, both in seq order; a change
		// without one is left out, as the join leaves it.
		for len(f.heads) > 0 && f.heads[0].seq < row.seq {
			f.heads = f.heads[1:]
		}
		row.actor.Valid = len(f.heads) > 0 && f.heads[0].seq == row.seq
		if row.actor.Valid {
			row.actor.String, row.created.Int64 = f.heads[0].actor, f.heads[0].created
		}
	}
	if row.seq != f.curSeq {
		if f.flush() {
			return true, nil
		}
		f.cands++
		f.curSeq = row.seq
		r.after = row.seq
		if row.actor.Valid {
			f.cur = commit.Commit{Seq: row.seq, CreatedAtMs: row.created.Int64, ActorID: row.actor.String}
			f.have = true
		}
	}
	if !f.have || !row.rowID.Valid {
		return false, nil
	}
	if f.lastMap == nil || !bytes.Equal(row.scopes, f.lastScopes) {
		if f.lastMap, err = decodeScopesIn(row.scopes, f.in); err != nil {
			return false, err
		}
		f.lastScopes = append(f.lastScopes[:0], row.scopes...)
		f.lastMatch = matches(f.lastMap, r.w.ScopeFilter)
	}
	if !f.lastMatch {
		return false, nil
	}
	ch := commit.Change{Table: r.w.Table, RowID: row.rowID.String, Op: commit.Op(row.op.Int64), Scopes: f.lastMap}
	if row.rowVersion.Valid {
		ch.RowVersion = row.rowVersion.Int64
	}
	if ch.Op == commit.OpUpsert && row.payload != nil {
		ch.Row = arena.copy(row.payload)
	}
	arena.changes = append(arena.changes, ch)
	if !f.ranged {
		f.order.idx = append(f.order.idx, row.idx.Int64)
	}
	return false, nil
}

// pageArena holds what one window read delivers in a few large
// allocations instead of one per change: the changes (each commit keeps a
// capped slice of them) and the payload bytes, in chunks that double from
// 4 KiB to 64 KiB.
type pageArena struct {
	changes []commit.Change
	bytes   []byte
}

const (
	pageArenaFirst = 4 << 10
	pageArenaMax   = 64 << 10
)

// copy returns b copied into the arena, capped so that nothing appended to
// it can reach a neighbour.
func (a *pageArena) copy(b []byte) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	if cap(a.bytes)-len(a.bytes) < len(b) {
		a.bytes = make([]byte, 0, max(min(2*cap(a.bytes), pageArenaMax), pageArenaFirst, len(b)))
	}
	n := len(a.bytes)
	a.bytes = append(a.bytes, b...)
	return a.bytes[n:len(a.bytes):len(a.bytes)]
}

// byIdx sorts one commit's changes by their index in the commit.
type byIdx struct {
	changes []commit.Change
	idx     []int64
}

func (b byIdx) Len() int           { return len(b.changes) }
func (b byIdx) Less(i, j int) bool { return b.idx[i] < b.idx[j] }
func (b byIdx) Swap(i, j int) {
	b.changes[i], b.changes[j] = b.changes[j], b.changes[i]
	b.idx[i], b.idx[j] = b.idx[j], b.idx[i]
}

// ReadCommitRange implements ports.LogReader: one statement over the
// commit and change primary keys, at most LimitChanges+1 rows; the commit
// holding the row past the limit is left out (it may be partial).
func (s *Store) ReadCommitRange(ctx context.Context, partition string, r ports.CommitRange) (ports.CommitSpan, error) {
	if r.LimitChanges < 1 {
		return ports.CommitSpan{}, syncerr.Newf(syncerr.StorageInvalidLimit, "commit range limit %d", r.LimitChanges)
	}
	span := ports.CommitSpan{ThroughSeq: max(r.AfterSeq, r.ThroughSeq)}
	if r.ThroughSeq <= r.AfterSeq {
		return span, nil
	}
	out, err := s.readCommitRange(ctx, partition, r, &span)
	return out, internal("read commit range", err)
}

func (s *Store) readCommitRange(ctx context.Context, partition string, r ports.CommitRange, span *ports.CommitSpan) (ports.CommitSpan, error) {
	rows, err := s.rd.QueryContext(ctx, s.q(`SELECT m.commit_seq, m.actor_id, m.created_at_ms, m.client_id, m.client_commit_id,
  ch.tbl, ch.row_id, ch.op, ch.row_version, ch.scopes, ch.payload
FROM sync_commits m
LEFT JOIN sync_changes ch ON ch.partition=? AND ch.commit_seq=m.commit_seq
WHERE m.partition=? AND m.commit_seq>? AND m.commit_seq<=?
ORDER BY m.commit_seq, ch.idx
LIMIT ?`), partition, partition, r.AfterSeq, r.ThroughSeq, r.LimitChanges+1)
	if err != nil {
		return ports.CommitSpan{}, err
	}
	defer func() { _ = rows.Close() }()
	var out []commit.Commit
	in := interner{}
	n := 0
	var seq, created int64
	var actor, client, clientCommit string
	var rowID sql.NullString
	var op, rowVersion sql.NullInt64
	var tbl, scopes, payload sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&seq, &actor, &created, &client, &clientCommit, &tbl, &rowID, &op, &rowVersion, &scopes, &payload); err != nil {
			return ports.CommitSpan{}, err
		}
		if n++; n > r.LimitChanges {
			// The limit's row: its commit is left out, whole.
			if len(out) > 0 && out[len(out)-1].Seq == seq {
				out = out[:len(out)-1]
			}
			span.ThroughSeq = seq - 1
			break
		}
		if len(out) == 0 || out[len(out)-1].Seq != seq {
			out = append(out, commit.Commit{Seq: seq, CreatedAtMs: created, ActorID: actor, ClientID: client, ClientCommitID: clientCommit})
		}
		if !rowID.Valid {
			continue // a commit without changes
		}
		m, err := decodeScopesIn(scopes, in)
		if err != nil {
			return ports.CommitSpan{}, err
		}
		ch := commit.Change{Table: in.str(tbl), RowID: rowID.String, Op: commit.Op(op.Int64), Scopes: m}
		if rowVersion.Valid {
			ch.RowVersion = rowVersion.Int64
		}
		if ch.Op == commit.OpUpsert && payload != nil {
			ch.Row = append(make([]byte, 0, len(payload)), payload...)
		}
		c := &out[len(out)-1]
		c.Changes = append(c.Changes, ch)
	}
	if err := rows.Err(); err != nil {
		return ports.CommitSpan{}, err
	}
	span.Commits = out
	return *span, nil
}

// PruneCommitsThrough implements ports.Pruner: epoch check, monotonic
// horizon and deletions in one transaction under the partition lock.
func (s *Store) PruneCommitsThrough(ctx context.Context, partition string, r ports.PruneRequest) (ports.PruneResult, error) {
	var res ports.PruneResult
	if r.ThroughSeq < 0 {
		return res, syncerr.Newf(syncerr.StorageInvalidPruneCursor, "prune through %d", r.ThroughSeq)
	}
	err := s.writeTx(ctx, "prune commits", partition, func(tx WriteTx) error {
		var epoch string
		ok, err := scanOne(tx.QueryRowContext(ctx, s.q("SELECT log_epoch FROM sync_partition_registry WHERE partition=?"), partition), &epoch)
		if err != nil {
			return err
		}
		if !ok || r.LogEpoch == "" || epoch != r.LogEpoch {
			return syncerr.Newf(syncerr.StoragePruneEpochMismatch, "partition %q: prune bound to a stale or unknown log epoch", partition)
		}
		var prev int64
		if err := tx.QueryRowContext(ctx, s.q("SELECT horizon_seq FROM sync_partitions WHERE partition=?"), partition).
			Scan(&prev); err != nil {
			return err
		}
		h := max(prev, r.ThroughSeq)
		res.PreviousHorizonSeq, res.HorizonSeq = prev, h
		if h != prev {
			if _, err := tx.ExecContext(ctx, s.q("UPDATE sync_partitions SET horizon_seq=? WHERE partition=?"), h, partition); err != nil {
				return err
			}
		}
		if err := s.pruneChangeScopes(ctx, tx, partition, h); err != nil {
			return err
		}
		for _, stmt := range []string{
			"DELETE FROM sync_changes WHERE partition=? AND commit_seq<=?",
			"DELETE FROM sync_tombstones WHERE partition=? AND commit_seq<=?",
		} {
			if _, err := tx.ExecContext(ctx, s.q(stmt), partition, h); err != nil {
				return err
			}
		}
		x, err := tx.ExecContext(ctx, s.q("DELETE FROM sync_commits WHERE partition=? AND commit_seq<=?"), partition, h)
		if err != nil {
			return err
		}
		res.RemovedCommits, err = x.RowsAffected()
		return err
	})
	if err != nil {
		return ports.PruneResult{}, err
	}
	return res, nil
}

// ActiveClientCursorFloor implements ports.Pruner.
func (s *Store) ActiveClientCursorFloor(ctx context.Context, partition string, cutoffMs int64) (int64, bool, error) {
	var floor sql.NullInt64
	err := s.rd.QueryRowContext(ctx, s.q("SELECT MIN(cursor) FROM sync_clients WHERE partition=? AND updated_at_ms>=? AND cursor>=0"), partition, cutoffMs).Scan(&floor)
	return floor.Int64, floor.Valid, internal("client cursor floor", err)
}

// CommitSeqBefore implements ports.Pruner.
func (s *Store) CommitSeqBefore(ctx context.Context, partition string, ms int64) (int64, error) {
	var seq sql.NullInt64
	err := s.rd.QueryRowContext(ctx, s.q("SELECT MAX(commit_seq) FROM sync_commits WHERE partition=? AND created_at_ms<?"), partition, ms).Scan(&seq)
	return seq.Int64, internal("commit seq before", err)
}

// Statement is one SQL statement with its arguments, already rebound.
type Statement struct {
	SQL  string
	Args []any
}

// PlanTargets returns the statements ReadCommitWindow (a candidate page
// and a dense window's range read) and ScanRows run for w and q, so engine
// tests can read their query plans.
func (s *Store) PlanTargets(partition string, w ports.CommitWindow, q ports.RowScan) ([]Statement, error) {
	var out []Statement
	drive, err := drivingVariable(w.ScopeFilter)
	if err != nil {
		return nil, err
	}
	values := dedupe(w.ScopeFilter[drive])
	batch := max(windowProbe, w.LimitChanges)
	args := candidateArgs([]any{partition, w.Table, drive}, values, []any{w.AfterSeq, w.ThroughSeq}, batch)
	out = append(out, Statement{s.windowQuery(len(values)), append(args, partition, partition, w.Table)})
	out = append(out, Statement{s.windowRangeQuery(), []any{partition, w.Table, w.AfterSeq, w.ThroughSeq}},
		Statement{s.windowHeadsQuery(), []any{partition, w.AfterSeq, w.ThroughSeq}})
	ts, err := s.table(q.Table)
	if err != nil {
		return nil, err
	}
	drive, err = drivingVariable(q.ScopeFilter)
	if err != nil {
		return nil, err
	}
	values = dedupe(q.ScopeFilter[drive])
	args = candidateArgs([]any{partition, q.Table, drive}, values, []any{q.AfterRowID}, max(64, q.Limit))
	out = append(out, Statement{s.scanQuery(ts, len(values)), append(args, partition)})
	return out, nil
}

// pruneChangeScopes deletes the scope-index entries at or below h. The keys
// come from the changes being pruned (a range of the log's primary key), so
// each delete is an index range of one (table, variable, value) instead of
// a pass over every entry the partition retains.
func (s *Store) pruneChangeScopes(ctx context.Context, tx WriteTx, partition string, h int64) error {
	rows, err := tx.QueryContext(ctx, s.q("SELECT tbl, scopes FROM sync_changes WHERE partition=? AND commit_seq<=?"), partition, h)
	if err != nil {
		return err
	}
	seen := map[[3]string]bool{}
	var keys [][3]string
	for rows.Next() {
		var tbl string
		var raw []byte
		if err := rows.Scan(&tbl, &raw); err != nil {
			_ = rows.Close()
			return err
		}
		m, err := decodeScopes(raw)
		if err != nil {
			_ = rows.Close()
			return err
		}
		for v, val := range m {
			if k := [3]string{tbl, v, val}; !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	del := s.q("DELETE FROM sync_change_scopes WHERE partition=? AND tbl=? AND var=? AND value=? AND commit_seq<=?")
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, del, partition, k[0], k[1], k[2], h); err != nil {
			return err
		}
	}
	return nil
}

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// GetPushResult implements ports.PushStore.
func (s *Store) GetPushResult(ctx context.Context, partition, clientID, clientCommitID string) (ports.PushRecord, bool, error) {
	r, ok, err := s.getPushResult(ctx, s.rd, partition, clientID, clientCommitID)
	return r, ok, internal("get push result", err)
}

func (s *Store) getPushResult(ctx context.Context, q Querier, partition, clientID, clientCommitID string) (ports.PushRecord, bool, error) {
	var raw string
	var actor sql.NullString
	ok, err := queryOne(ctx, q, s.q(
		"SELECT result, actor_id FROM sync_push_results WHERE partition=? AND client_id=? AND client_commit_id=?"),
		[]any{partition, clientID, clientCommitID}, &raw, &actor)
	if err != nil || !ok {
		return ports.PushRecord{}, false, err
	}
	return ports.PushRecord{Result: []byte(raw), ActorID: actor.String}, true, nil
}

// Push implements ports.PushStore. fn's own error comes back unchanged;
// transient engine conflicts are retried with a fresh transaction. On a
// GroupCommitter dialect pushes commit in groups (pushbatch.go), on a
// PartitionGroupCommitter in groups per partition (pushgroup.go).
func (s *Store) Push(ctx context.Context, partition string, opts ports.PushOptions, fn func(tx ports.PushTx) error) error {
	if s.pushes != nil || s.parts != nil {
		return s.pushGrouped(ctx, partition, opts, fn)
	}
	var fnErr error
	var ptx *pushTx
	err := s.writeTx(ctx, "push", partition, func(tx WriteTx) error {
		ptx = &pushTx{s: s, tx: tx, partition: partition, writerVersion: opts.WriterVersion, actorID: opts.ActorID}
		fnErr = fn(ptx)
		return fnErr
	})
	if err == nil {
		s.noteWrites(ptx.written)
		s.noteBindings(ptx.bound)
		s.recent.add(partition, ptx.epoch, ptx.appended)
	}
	if err != nil && fnErr != nil && !s.d.Retryable(fnErr) {
		return fnErr
	}
	return err
}

// pushTx is one open push transaction.
type pushTx struct {
	s             *Store
	tx            WriteTx
	partition     string
	writerVersion int32
	actorID       string
	savepoint     bool
	// discardTo is the savepoint a grouped push began in (pushgroup.go):
	// DiscardWrites returns to it, and no savepoint of its own is taken.
	discardTo string
	// gate is the serve gate read ahead for a grouped push, good while
	// the push has run no statement (ran) of its own.
	gate    *checkpoint.ServeGate
	ran     bool
	written int // rows staged, for statistics refresh
	// bound are the bindings seen or made, cached after commit; rebind
	// the client ids bound after the savepoint, redone by DiscardWrites.
	bound  []binding
	rebind []string
	// absent are the idempotency keys read as absent and not stored since.
	absent [][2]string
	// idem is the idempotency record read ahead for a grouped push.
	idem *idemAhead
	// tomb is the tombstone of the absent row GetRow read last, good
	// until the push writes.
	tomb *tombRead
	// row is the first row read ahead for a grouped push, good until the
	// push writes.
	row *rowAhead
	// seq is the partition's last commit seq as this grouped push's group
	// knows it (nil: unknown, the appends allocate from the partition
	// row): its appends take the next seqs and leave the row to the
	// group; they are held back too, unless a held row write may fail a
	// constraint (constrained).
	seq         *seqAhead
	constrained bool
	// seen is what GetRow read last of one row, good until the push
	// writes; memo is the SQLite group's (runGrouped), nil elsewhere.
	seen *rowSeen
	memo *groupMemo
	// grp is the PostgreSQL group's run (pushgroup.go), nil elsewhere: a
	// push notes there what it writes that a later member's read ahead
	// may have read.
	grp *groupRun
	// appended are the commits staged since the savepoint, for the recent
	// log once they committed, under epoch, the log epoch the push read
	// with its serve gate (recent.go).
	appended []appended
	epoch    string
}

// rowSeen is what a push read of one row under the lock: whether it
// exists, its stored scopes and whether a tombstone is kept for it.
type rowSeen struct {
	table, rowID string
	exists, tomb bool
	scopes       []byte
}

// groupMemo is what a SQLite group's transaction has established for its
// later members: the partitions locked, with the commit seq it holds for
// each (closeSeqs), and the serve gates read. The group holds the database's only write lock and none of its
// pushes writes what the gate reads (pushbatch.go), so a gate read by
// one member is the gate of every later one, until a single-statement
// write (which may mint an epoch) joins the group.
type groupMemo struct {
	seqs  map[string]*groupSeq // the partitions locked, with their seq
	gates map[gateKey]checkpoint.ServeGate
}

type gateKey struct {
	partition string
	running   int32
}

func newGroupMemo() *groupMemo {
	return &groupMemo{seqs: map[string]*groupSeq{}, gates: map[gateKey]checkpoint.ServeGate{}}
}

// seqAhead is a grouped push's view of its partition's last commit seq,
// as its group holds it under the partition lock: only the push's own
// appends move it while it runs.
type seqAhead struct {
	base int64 // at the savepoint (what DiscardWrites returns to)
	last int64
}

// idemAhead is an idempotency record read with a group member's savepoint.
type idemAhead struct {
	clientID, clientCommitID string
	rec                      ports.PushRecord
	found                    bool
}

const savepointName = "sync_push_apply"

// beforeWrite takes the savepoint DiscardWrites returns to, before the
// transaction's first write (nothing precedes it but the lock and reads).
func (t *pushTx) beforeWrite(ctx context.Context) error {
	t.tomb, t.row, t.seen = nil, nil, nil
	if t.savepoint || t.discardTo != "" {
		return nil
	}
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT "+savepointName); err != nil {
		return internal("savepoint", err)
	}
	t.savepoint = true
	return nil
}

func (t *pushTx) Partition() string { return t.partition }

func (t *pushTx) ReadServeGate(ctx context.Context) (checkpoint.ServeGate, error) {
	if g := t.gate; g != nil {
		t.gate = nil
		if !t.ran {
			if err := ctx.Err(); err != nil {
				return checkpoint.ServeGate{}, internal("read serve gate", err)
			}
			t.epoch = g.LogEpoch
			return *g, nil
		}
	}
	key := gateKey{t.partition, t.writerVersion}
	if t.memo != nil {
		if g, ok := t.memo.gates[key]; ok {
			t.epoch = g.LogEpoch
			return g, internal("read serve gate", ctx.Err())
		}
	}
	g, err := t.s.serveGate(ctx, t.tx, t.partition, t.writerVersion)
	if err == nil && t.memo != nil {
		t.memo.gates[key] = g
	}
	if err == nil {
		t.epoch = g.LogEpoch
	}
	return g, internal("read serve gate", err)
}

func (t *pushTx) GetPushResult(ctx context.Context, clientID, clientCommitID string) (ports.PushRecord, bool, error) {
	if a := t.idem; a != nil && a.clientID == clientID && a.clientCommitID == clientCommitID {
		t.idem = nil
		if err := ctx.Err(); err != nil {
			return ports.PushRecord{}, false, internal("get push result", err)
		}
		if !a.found {
			t.absent = append(t.absent, [2]string{clientID, clientCommitID})
		}
		return a.rec, a.found, nil
	}
	r, ok, err := t.s.getPushResult(ctx, t.tx, t.partition, clientID, clientCommitID)
	if err == nil && !ok {
		// Read under the partition lock: no other writer can store it.
		t.absent = append(t.absent, [2]string{clientID, clientCommitID})
	}
	return r, ok, internal("get push result", err)
}

// takeAbsent reports whether this transaction read the record as absent
// and has not stored it since.
func (t *pushTx) takeAbsent(clientID, clientCommitID string) bool {
	for i, k := range t.absent {
		if k == [2]string{clientID, clientCommitID} {
			t.absent = append(t.absent[:i], t.absent[i+1:]...)
			return true
		}
	}
	return false
}

// GetRow reads the row and, in the same statement, its tombstone, kept
// for a TombstoneSeq of the same absent row before the push writes again.
func (t *pushTx) GetRow(ctx context.Context, table, rowID string) (*commit.Row, error) {
	t.tomb = nil
	var r commit.Row
	var version, tomb sql.NullInt64
	var scopes []byte
	if a := t.row; a != nil && a.table == table && a.rowID == rowID {
		// Read with the savepoint, and the push has written nothing since.
		t.row = nil
		if err := ctx.Err(); err != nil {
			return nil, internal("get row", err)
		}
		version, scopes, r.Payload, r.ColumnVersions, tomb = a.version, a.scopes, a.payload, a.cv, a.tomb
	} else {
		ts, err := t.s.table(table)
		if err != nil {
			return nil, err
		}
		if _, err := queryOne(ctx, t.tx, ts.getTomb, []any{t.partition, rowID, t.partition, table, rowID},
			&version, &scopes, &r.Payload, columnVersions{&r.ColumnVersions}, &tomb); err != nil {
			return nil, internal("get row", err)
		}
	}
	t.seen = &rowSeen{table: table, rowID: rowID, exists: version.Valid, tomb: tomb.Valid, scopes: scopes}
	if !version.Valid {
		t.tomb = &tombRead{table: table, rowID: rowID, seq: tomb.Int64, ok: tomb.Valid}
		return nil, nil
	}
	r.RowID, r.Version = rowID, version.Int64
	var err error
	if r.Scopes, err = decodeScopes(scopes); err != nil {
		return nil, internal("get row", err)
	}
	return &r, nil
}

// tombRead is an absent row's tombstone read with it.
type tombRead struct {
	table, rowID string
	seq          int64
	ok           bool
}

func (t *pushTx) TombstoneSeq(ctx context.Context, table, rowID string) (int64, bool, error) {
	if r := t.tomb; r != nil && r.table == table && r.rowID == rowID {
		return r.seq, r.ok, nil
	}
	ts, err := t.s.table(table)
	if err != nil {
		return 0, false, err
	}
	var seq int64
	ok, err := queryOne(ctx, t.tx, ts.tombGet, []any{t.partition, table, rowID}, &seq)
	return seq, ok, internal("read tombstone", err)
}

func (t *pushTx) ScanRows(ctx context.Context, q ports.RowScan) ([]commit.Row, error) {
	return t.s.scanRows(ctx, t.tx, t.partition, q)
}

func (t *pushTx) Lookup(ctx context.Context, q ports.RowLookup) ([]commit.Row, error) {
	return t.s.lookup(ctx, t.tx, t.partition, q)
}

// constraint classifies an engine failure of a row write.
func (t *pushTx) constraint(op string, err error, table string, opIndex int) error {
	if kind, ok := t.s.d.ConstraintKind(err); ok {
		return &ports.ConstraintError{OpIndex: opIndex, Table: table, Kind: kind}
	}
	return internal(op, err)
}

// columnVersions scans _sync_column_versions keeping an empty blob apart
// from NULL: an empty blob is a row whose columns are all at version 1,
// NULL a row stored before column versions existed, every column at the
// row's version (SPEC §2.2). modernc hands a zero-length blob over as a
// nil []byte of its type; only NULL arrives as nil itself.
type columnVersions struct{ dst *[]byte }

func (c columnVersions) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.dst = nil
	case []byte:
		*c.dst = append([]byte{}, v...)
	case string:
		*c.dst = []byte(v)
	default:
		return fmt.Errorf("column versions: unexpected %T", src)
	}
	return nil
}

func nilIfEmpty(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func (t *pushTx) UpsertRow(ctx context.Context, table string, w ports.RowWrite) error {
	ts, err := t.s.table(table)
	if err != nil {
		return err
	}
	t.grp.touch(table, w.RowID)
	seen := t.seen
	if seen != nil && (seen.table != table || seen.rowID != w.RowID) {
		seen = nil
	}
	if err := t.beforeWrite(ctx); err != nil {
		return err
	}
	args := make([]any, 0, 6+len(ts.types))
	args = append(args, t.partition, w.RowID)
	if ts.t.Materialize {
		if len(w.Values) != len(ts.types) {
			return syncerr.Newf(syncerr.InternalError, "upsert %q: %d values for %d columns", table, len(w.Values), len(ts.types))
		}
		for i, v := range w.Values {
			args = append(args, t.s.d.BindValue(ts.types[i], v))
		}
	}
	payload := w.Payload
	if payload == nil {
		payload = []byte{}
	}
	enc := encodeScopes(w.Scopes)
	args = append(args, w.Version, enc, payload, nilIfEmpty(w.ColumnVersions))
	// What the push read of the row under the lock spares work: an
	// existing row keeps its scope index when its scopes stay the same
	// (every write of a row writes both), and a row without a tombstone
	// has none to clear.
	sameScopes := seen != nil && seen.exists && string(seen.scopes) == enc
	if t.s.d.CombinedWrites() {
		t.constrained = t.constrained || mayViolate(ts, w)
		fail := func(err error) error { return t.constraint("upsert row", err, table, w.OpIndex) }
		if sameScopes && !seen.tomb {
			return t.exec(ctx, ts.upsert, args, fail)
		}
		return t.exec(ctx, t.s.combinedUpsert(ts, len(w.Scopes)), t.s.combinedUpsertArgs(args, t.partition, ts, w.RowID, w.Scopes), fail)
	}
	if _, err := t.tx.ExecContext(ctx, ts.upsert, args...); err != nil {
		return t.constraint("upsert row", err, table, w.OpIndex)
	}
	if !sameScopes {
		if err := t.s.writeRowScopes(ctx, t.tx, t.partition, ts, w.RowID, w.Scopes); err != nil {
			return internal("upsert row scopes", err)
		}
	}
	if seen == nil || seen.tomb {
		if _, err := t.tx.ExecContext(ctx, ts.tombDel, t.partition, table, w.RowID); err != nil {
			return internal("clear tombstone", err)
		}
	}
	return nil
}

// mayViolate says whether w could fail a constraint of its table: a
// declared unique index, or no value for a NOT NULL column (app tables
// carry no other constraint). Such a write's failure is the push's
// rejection, which its AppendCommit reports, so its append is not held.
func mayViolate(ts *tableSQL, w ports.RowWrite) bool {
	if !ts.t.Materialize {
		return false
	}
	for _, ix := range ts.t.Indexes {
		if ix.Unique {
			return true
		}
	}
	for i, c := range ts.t.Columns {
		if !c.Nullable && (i >= len(w.Values) || w.Values[i] == nil) {
			return true
		}
	}
	return false
}

// combinedUpsert is UpsertRow as one statement: the row upsert, the
// row-scope index refresh (dropping only pairs that changed, so no row is
// touched twice) and the tombstone clear, as data-modifying CTEs.
func (s *Store) combinedUpsert(ts *tableSQL, nscopes int) string {
	return s.shaped(stmtShape{table: ts, scopes: nscopes}, func() string { return s.buildCombinedUpsert(ts, nscopes) })
}

func (s *Store) buildCombinedUpsert(ts *tableSQL, nscopes int) string {
	key := "partition=? AND tbl=? AND row_id=?"
	var b strings.Builder
	b.WriteString("WITH up AS (")
	b.WriteString(ts.upsertRaw)
	b.WriteString("), ds AS (DELETE FROM sync_row_scopes WHERE ")
	b.WriteString(key)
	if nscopes > 0 {
		b.WriteString(" AND (var, value) NOT IN (VALUES ")
		b.WriteString(valuesList(nscopes, 2))
		b.WriteString(")), ins AS (INSERT INTO sync_row_scopes(partition, tbl, var, value, row_id) VALUES ")
		b.WriteString(valuesList(nscopes, 5))
		b.WriteString(" ON CONFLICT DO NOTHING")
	}
	b.WriteString("), dt AS (DELETE FROM sync_tombstones WHERE ")
	b.WriteString(key)
	b.WriteString(") SELECT 1")
	return s.q(b.String())
}

func (s *Store) combinedUpsertArgs(upsert []any, partition string, ts *tableSQL, rowID string, scopes map[string]string) []any {
	args := append(upsert, partition, ts.name, rowID)
	if len(scopes) > 0 {
		vars := make([]string, 0, len(scopes))
		for v := range scopes {
			vars = append(vars, v)
		}
		sort.Strings(vars)
		for _, v := range vars {
			args = append(args, v, scopes[v])
		}
		for _, v := range vars {
			args = append(args, partition, ts.name, v, scopes[v], rowID)
		}
	}
	return append(args, partition, ts.name, rowID)
}

// writeRowScopes replaces a row's entries in the row-scope index.
func (s *Store) writeRowScopes(ctx context.Context, q Querier, partition string, ts *tableSQL, rowID string, scopes map[string]string) error {
	if _, err := q.ExecContext(ctx, ts.rowScopesDel, partition, ts.name, rowID); err != nil {
		return err
	}
	if len(scopes) == 0 {
		return nil
	}
	args := make([]any, 0, 5*len(scopes))
	for v, val := range scopes {
		args = append(args, partition, ts.name, v, val, rowID)
	}
	_, err := q.ExecContext(ctx, s.q("INSERT INTO sync_row_scopes(partition, tbl, var, value, row_id) VALUES "+
		valuesList(len(scopes), 5)+" ON CONFLICT DO NOTHING"), args...)
	return err
}

// valuesList renders "(?,…),(?,…)" for rows of width placeholders.
func valuesList(rows, width int) string {
	one := "(" + placeholders(width) + ")"
	var b strings.Builder
	b.Grow(rows * (len(one) + 1))
	for i := 0; i < rows; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(one)
	}
	return b.String()
}

func (t *pushTx) DeleteRow(ctx context.Context, table, rowID string, opIndex int) error {
	ts, err := t.s.table(table)
	if err != nil {
		return err
	}
	t.grp.touch(table, rowID)
	if err := t.beforeWrite(ctx); err != nil {
		return err
	}
	if t.s.d.CombinedWrites() {
		return t.exec(ctx, ts.delCombined, []any{t.partition, rowID, t.partition, table, rowID, t.partition, table, rowID},
			func(err error) error { return t.constraint("delete row", err, table, opIndex) })
	}
	if _, err := t.tx.ExecContext(ctx, ts.del, t.partition, rowID); err != nil {
		return t.constraint("delete row", err, table, opIndex)
	}
	if _, err := t.tx.ExecContext(ctx, ts.rowScopesDel, t.partition, table, rowID); err != nil {
		return internal("delete row scopes", err)
	}
	if _, err := t.tx.ExecContext(ctx, ts.blobDel, t.partition, table, rowID); err != nil {
		return internal("delete blob refs", err)
	}
	return nil
}

func (t *pushTx) SetBlobRefs(ctx context.Context, table, rowID string, blobIDs []string) error {
	ts, err := t.s.table(table)
	if err != nil {
		return err
	}
	if err := t.beforeWrite(ctx); err != nil {
		return err
	}
	fail := func(err error) error { return internal("set blob refs", err) }
	if err := t.exec(ctx, ts.blobDel, []any{t.partition, table, rowID}, fail); err != nil {
		return err
	}
	ids := dedupe(blobIDs)
	for start := 0; start < len(ids); start += chunkRows {
		part := ids[start:min(len(ids), start+chunkRows)]
		args := make([]any, 0, 4*len(part))
		for _, id := range part {
			args = append(args, t.partition, table, rowID, id)
		}
		if err := t.exec(ctx, t.s.q("INSERT INTO sync_blob_refs(partition, tbl, row_id, blob_id) VALUES "+
			valuesList(len(part), 4)+" ON CONFLICT DO NOTHING"), args, fail); err != nil {
			return err
		}
	}
	return nil
}

// chunkRows bounds the rows of one multi-row INSERT.
const chunkRows = 64

func (t *pushTx) AppendCommit(ctx context.Context, c ports.NewCommit) (int64, error) {
	if err := t.beforeWrite(ctx); err != nil {
		return 0, err
	}
	t.written += len(c.Changes)
	for _, ch := range c.Changes {
		t.grp.touch(ch.Table, ch.RowID) // its tombstone, for a delete
	}
	fail := func(err error) error {
		if t.s.d.FenceRejected(err) {
			return syncerr.Wrap(syncerr.StorageWriterFenceRejected, err)
		}
		return internal("append commit", err)
	}
	if t.seq != nil {
		// The group owns the partition's seq (pushgroup.go; SQLite:
		// closeSeqs in pushbatch.go): the append writes the next one and
		// leaves the partition row to the group, which moves it once,
		// with its COMMIT. On PostgreSQL, answering nothing the push
		// waits for, the append is held back like the row writes, unless
		// a held row write may fail a constraint (constrained): the
		// append must then report that failure.
		seq := t.seq.last + 1
		if d := t.deferred(); d != nil && !t.constrained && t.s.d.CombinedWrites() && len(c.Changes) <= chunkRows {
			text, args := t.s.appendCommitStatement(t.partition, t.writerVersion, c, seq)
			if err := d.Defer(ctx, text, args, fail); err != nil {
				return 0, fail(err)
			}
		} else if _, err := t.s.appendCommit(ctx, t.tx, t.partition, t.writerVersion, c, seq); err != nil {
			return 0, fail(err)
		}
		t.seq.last = seq
		t.note(seq, c)
		return seq, nil
	}
	seq, err := t.s.appendCommit(ctx, t.tx, t.partition, t.writerVersion, c, 0)
	if err != nil {
		return 0, fail(err)
	}
	t.note(seq, c)
	return seq, nil
}

// note keeps an appended commit for the recent log (copied: c's bytes
// are the caller's).
func (t *pushTx) note(seq int64, c ports.NewCommit) {
	if t.s.recent != nil {
		t.appended = append(t.appended, heldForm(seq, c))
	}
}

// appendCommit allocates the next dense seq (the partition row is locked)
// and writes the commit, its changes, the scope index and tombstones.
// With given > 0 the commit takes that seq and the partition row is left
// as it is (a group's member: the group moves it).
func (s *Store) appendCommit(ctx context.Context, q Querier, partition string, wv int32, c ports.NewCommit, given int64) (int64, error) {
	if s.d.CombinedWrites() && len(c.Changes) <= chunkRows {
		return s.appendCommitCombined(ctx, q, partition, wv, c, given)
	}
	seq := given
	if given == 0 {
		if err := q.QueryRowContext(ctx, s.q("UPDATE sync_partitions SET max_commit_seq=max_commit_seq+1 WHERE partition=? RETURNING max_commit_seq"),
			partition).Scan(&seq); err != nil {
			return 0, fmt.Errorf("allocate commit seq: %w", err)
		}
	}
	if _, err := q.ExecContext(ctx, s.q(`INSERT INTO sync_commits(partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version)
VALUES (?, ?, ?, ?, ?, ?, ?)`), partition, seq, c.ClientID, c.ClientCommitID, c.ActorID, c.CreatedAtMs, wv); err != nil {
		return 0, err
	}
	type scopeKey struct{ tbl, v, val string }
	type rowKey struct{ tbl, id string }
	var scopeKeys []scopeKey
	seenScope := map[scopeKey]bool{}
	var tombs []rowKey
	seenTomb := map[rowKey]bool{}
	for start := 0; start < len(c.Changes); start += chunkRows {
		part := c.Changes[start:min(len(c.Changes), start+chunkRows)]
		args := make([]any, 0, 9*len(part))
		for i, ch := range part {
			var version, payload any
			if ch.Op == commit.OpUpsert {
				version, payload = ch.RowVersion, nilIfEmpty(ch.Row)
				if payload == nil {
					payload = []byte{}
				}
			} else {
				k := rowKey{ch.Table, ch.RowID}
				if !seenTomb[k] {
					seenTomb[k] = true
					tombs = append(tombs, k)
				}
			}
			args = append(args, partition, seq, start+i, ch.Table, ch.RowID, int64(ch.Op), version, encodeScopes(ch.Scopes), payload)
			for v, val := range ch.Scopes {
				k := scopeKey{ch.Table, v, val}
				if !seenScope[k] {
					seenScope[k] = true
					scopeKeys = append(scopeKeys, k)
				}
			}
		}
		if _, err := q.ExecContext(ctx, s.q("INSERT INTO sync_changes(partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload) VALUES "+
			valuesList(len(part), 9)), args...); err != nil {
			return 0, fmt.Errorf("insert changes: %w", err)
		}
	}
	for start := 0; start < len(scopeKeys); start += chunkRows {
		part := scopeKeys[start:min(len(scopeKeys), start+chunkRows)]
		args := make([]any, 0, 5*len(part))
		for _, k := range part {
			args = append(args, partition, k.tbl, k.v, k.val, seq)
		}
		if _, err := q.ExecContext(ctx, s.q("INSERT INTO sync_change_scopes(partition, tbl, var, value, commit_seq) VALUES "+
			valuesList(len(part), 5)+" ON CONFLICT DO NOTHING"), args...); err != nil {
			return 0, fmt.Errorf("insert change scopes: %w", err)
		}
	}
	for start := 0; start < len(tombs); start += chunkRows {
		part := tombs[start:min(len(tombs), start+chunkRows)]
		args := make([]any, 0, 4*len(part))
		for _, k := range part {
			args = append(args, partition, k.tbl, k.id, seq)
		}
		if _, err := q.ExecContext(ctx, s.q("INSERT INTO sync_tombstones(partition, tbl, row_id, commit_seq) VALUES "+
			valuesList(len(part), 4)+" ON CONFLICT (partition, tbl, row_id) DO UPDATE SET commit_seq=excluded.commit_seq"), args...); err != nil {
			return 0, fmt.Errorf("record tombstones: %w", err)
		}
	}
	return seq, nil
}

func (t *pushTx) EnqueueReactions(ctx context.Context, src ports.ReactionSource, rs []ports.Reaction) error {
	if len(rs) == 0 {
		return nil
	}
	if err := t.beforeWrite(ctx); err != nil {
		return err
	}
	for start := 0; start < len(rs); start += chunkRows {
		part := rs[start:min(len(rs), start+chunkRows)]
		args := make([]any, 0, 13*len(part))
		for _, r := range part {
			payload := string(r.Payload)
			if payload == "" {
				payload = "null"
			}
			args = append(args, t.partition, r.IdempotencyKey, r.Type, r.Version, payload,
				src.ClientID, src.ClientCommitID, src.CommitSeq, src.CreatedAtMs, r.AvailableAtMs, "pending", 0, r.MaxAttempts)
		}
		if err := t.exec(ctx, t.s.q(`INSERT INTO sync_reactions(partition, idempotency_key, type, version, payload,
source_client_id, source_client_commit_id, source_commit_seq, created_at_ms, available_at_ms, status, attempts, max_attempts) VALUES `+
			valuesList(len(part), 13)+" ON CONFLICT (partition, idempotency_key) DO NOTHING"), args,
			func(err error) error { return internal("enqueue reactions", err) }); err != nil {
			return err
		}
	}
	return nil
}

func (t *pushTx) PutPushResult(ctx context.Context, clientID, clientCommitID string, result []byte) ([]byte, error) {
	if err := t.beforeWrite(ctx); err != nil {
		return nil, err
	}
	t.grp.store(clientID, clientCommitID)
	owner := sql.NullString{String: t.actorID, Valid: t.actorID != ""}
	if d := t.deferred(); d != nil && t.takeAbsent(clientID, clientCommitID) {
		// This transaction read the record as absent under the partition
		// lock, so it is ours to store: a plain insert, whose conflict
		// (impossible but for a bug) fails the push instead of keeping
		// another result silently.
		err := d.Defer(ctx, t.s.q(`INSERT INTO sync_push_results(partition, client_id, client_commit_id, result, actor_id)
VALUES (?, ?, ?, ?, ?)`), []any{t.partition, clientID, clientCommitID, string(result), owner},
			func(err error) error { return internal("put push result", err) })
		return result, err
	}
	res, err := t.tx.ExecContext(ctx, t.s.q(`INSERT INTO sync_push_results(partition, client_id, client_commit_id, result, actor_id)
VALUES (?, ?, ?, ?, ?) ON CONFLICT (partition, client_id, client_commit_id) DO NOTHING`), t.partition, clientID, clientCommitID, string(result), owner)
	if err != nil {
		return nil, internal("put push result", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, internal("put push result", err)
	} else if n == 1 {
		return result, nil
	}
	stored, ok, err := t.s.getPushResult(ctx, t.tx, t.partition, clientID, clientCommitID)
	if err != nil {
		return nil, internal("put push result", err)
	}
	if !ok {
		return nil, syncerr.Newf(syncerr.IdempotencyCacheMiss, "push result vanished")
	}
	return stored.Result, nil
}

func (t *pushTx) DiscardWrites(ctx context.Context) error {
	t.tomb, t.row, t.seen, t.constrained = nil, nil, nil, false
	t.appended = nil
	if t.seq != nil {
		t.seq.last = t.seq.base
	}
	t.dropDeferred()
	switch {
	case t.discardTo != "":
		// The push's own savepoint precedes its reads too, so every
		// binding it made is redone (rebind holds them all).
		if _, err := t.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+t.discardTo); err != nil {
			return internal("discard writes", err)
		}
	case !t.savepoint:
		return nil
	default:
		if _, err := t.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+savepointName); err != nil {
			return internal("discard writes", err)
		}
	}
	for _, c := range t.rebind {
		if _, err := t.s.bind(ctx, t.tx, t.partition, c, t.actorID); err != nil {
			return internal("discard writes: bind client", err)
		}
	}
	return nil
}

func (t *pushTx) AdvanceCheckpoint(ctx context.Context, a ports.CheckpointAdvance) (bool, error) {
	if err := t.beforeWrite(ctx); err != nil {
		return false, err
	}
	ok, err := t.s.advanceCheckpoint(ctx, t.tx, a)
	return ok, internal("advance checkpoint", err)
}

var _ ports.PushTx = (*pushTx)(nil)

// changeKeys collects a commit's distinct scope-index keys and deleted rows.
func changeKeys(changes []commit.Change) (scopes [][3]string, tombs [][2]string) {
	seenScope := map[[3]string]bool{}
	seenTomb := map[[2]string]bool{}
	for _, ch := range changes {
		if ch.Op != commit.OpUpsert {
			if k := [2]string{ch.Table, ch.RowID}; !seenTomb[k] {
				seenTomb[k] = true
				tombs = append(tombs, k)
			}
		}
		vars := make([]string, 0, len(ch.Scopes))
		for v := range ch.Scopes {
			vars = append(vars, v)
		}
		sort.Strings(vars)
		for _, v := range vars {
			if k := [3]string{ch.Table, v, ch.Scopes[v]}; !seenScope[k] {
				seenScope[k] = true
				scopes = append(scopes, k)
			}
		}
	}
	return scopes, tombs
}

// appendCommitCombined is appendCommit as one statement of data-modifying
// CTEs (seq allocation, commit, changes, scope index, tombstones) for
// engines that support them; typed VALUES lists carry the rows.
func (s *Store) appendCommitCombined(ctx context.Context, q Querier, partition string, wv int32, c ports.NewCommit, given int64) (int64, error) {
	text, args := s.appendCommitStatement(partition, wv, c, given)
	var seq int64
	if ok, err := queryOne(ctx, q, text, args, &seq); err != nil || !ok {
		return 0, errors.Join(err, errNoSeq(ok))
	}
	return seq, nil
}

// appendCommitStatement is appendCommitCombined's statement and
// arguments; it returns the commit's seq. With given > 0 the commit takes
// that seq and the partition row is not written.
func (s *Store) appendCommitStatement(partition string, wv int32, c ports.NewCommit, given int64) (string, []any) {
	scopes, tombs := changeKeys(c.Changes)
	args := make([]any, 0, 8+8*len(c.Changes)+3*len(scopes)+2*len(tombs))
	var first any = partition
	if given > 0 {
		first = given
	}
	args = append(args, first, partition, c.ClientID, c.ClientCommitID, c.ActorID, c.CreatedAtMs, int64(wv))
	if len(c.Changes) > 0 {
		args = append(args, partition)
		for i, ch := range c.Changes {
			var version, payload any
			if ch.Op == commit.OpUpsert {
				version, payload = ch.RowVersion, ch.Row
				if ch.Row == nil {
					payload = []byte{}
				}
			}
			args = append(args, i, ch.Table, ch.RowID, int64(ch.Op), version, encodeScopes(ch.Scopes), payload)
		}
	}
	if len(scopes) > 0 {
		args = append(args, partition)
		for _, k := range scopes {
			args = append(args, k[0], k[1], k[2])
		}
	}
	if len(tombs) > 0 {
		args = append(args, partition)
		for _, k := range tombs {
			args = append(args, k[0], k[1])
		}
	}
	shape := stmtShape{commit: true, changes: len(c.Changes), scopes: len(scopes), tombs: len(tombs), given: given > 0}
	return s.shaped(shape, func() string { return s.buildAppendCommit(shape) }), args
}

// buildAppendCommit renders appendCommitCombined's statement for a shape.
func (s *Store) buildAppendCommit(shape stmtShape) string {
	var b strings.Builder
	if shape.given {
		b.WriteString(`WITH seq AS (SELECT CAST(? AS BIGINT) AS s),
`)
	} else {
		b.WriteString(`WITH seq AS (UPDATE sync_partitions SET max_commit_seq=max_commit_seq+1 WHERE partition=? RETURNING max_commit_seq AS s),
`)
	}
	b.WriteString(`c AS (INSERT INTO sync_commits(partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version)
  SELECT ?, s, ?, ?, ?, CAST(? AS BIGINT), CAST(? AS BIGINT) FROM seq)`)
	if shape.changes > 0 {
		b.WriteString(`, ch AS (INSERT INTO sync_changes(partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload)
  SELECT ?, seq.s, v.i, v.t, v.r, v.o, v.rv, v.sc, v.pl FROM seq, (VALUES `)
		for i := range shape.changes {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(CAST(? AS INTEGER), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS SMALLINT), CAST(? AS BIGINT), CAST(? AS JSONB), CAST(? AS BYTEA))")
		}
		b.WriteString(") AS v(i, t, r, o, rv, sc, pl))")
	}
	if shape.scopes > 0 {
		b.WriteString(`, cs AS (INSERT INTO sync_change_scopes(partition, tbl, var, value, commit_seq)
  SELECT ?, v.t, v.k, v.x, seq.s FROM seq, (VALUES `)
		for i := range shape.scopes {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT))")
		}
		b.WriteString(") AS v(t, k, x) ON CONFLICT DO NOTHING)")
	}
	if shape.tombs > 0 {
		b.WriteString(`, tb AS (INSERT INTO sync_tombstones(partition, tbl, row_id, commit_seq)
  SELECT ?, v.t, v.r, seq.s FROM seq, (VALUES `)
		for i := range shape.tombs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(CAST(? AS TEXT), CAST(? AS TEXT))")
		}
		b.WriteString(") AS v(t, r) ON CONFLICT (partition, tbl, row_id) DO UPDATE SET commit_seq=excluded.commit_seq)")
	}
	b.WriteString(" SELECT s FROM seq")
	return s.q(b.String())
}

// stmtShape keys a composed statement whose text depends only on counts.
type stmtShape struct {
	commit bool // appendCommitCombined; else combinedUpsert of table
	// table is combinedUpsert's table as the running schema renders it
	// (a schema change makes new ones).
	table                  *tableSQL
	changes, scopes, tombs int
	// given: the seq is an argument, the partition row is not written.
	given bool
}

// maxShapes bounds the composed statements kept.
const maxShapes = 4096

// shaped returns the composed statement of shape, building (and keeping)
// it once: the hot write paths then neither render nor rebind SQL.
func (s *Store) shaped(shape stmtShape, build func() string) string {
	if v, ok := s.shapes.Load(shape); ok {
		return v.(string)
	}
	text := build()
	if s.nshapes.Add(1) <= maxShapes {
		s.shapes.Store(shape, text)
	}
	return text
}

// errNoSeq is the commit append's failure when its statement returned no
// seq (nil when it did).
func errNoSeq(ok bool) error {
	if ok {
		return nil
	}
	return errors.New("commit append returned no seq")
}

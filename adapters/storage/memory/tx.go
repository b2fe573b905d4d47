package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Push runs fn in a transaction holding the partition's write lock. The
// transaction works on a private copy of the partition and publishes it
// only when fn returns nil.
func (s *Store) Push(ctx context.Context, name string, opts ports.PushOptions, fn func(tx ports.PushTx) error) error {
	sc, err := s.ensured()
	if err != nil {
		return err
	}
	unlock, err := s.db.lockPartition(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	s.db.mu.Lock()
	base := s.db.part(name).d.clone()
	s.db.mu.Unlock()
	tx := &pushTx{s: s, schema: sc, partition: name, opts: opts, d: base}
	ferr := fn(tx)
	tx.mu.Lock()
	tx.done = true
	d := tx.d
	tx.mu.Unlock()
	if ferr != nil {
		return ferr
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.db.mu.Lock()
	p := s.db.part(name)
	p.d, p.logged = d, true
	// The partition lock is held: nobody bound these since the tx read them.
	for c, a := range tx.binds {
		p.bindings[c] = a
	}
	s.db.mu.Unlock()
	return nil
}

type pushTx struct {
	s         *Store
	schema    *schema.Schema
	partition string
	opts      ports.PushOptions

	mu   sync.Mutex
	done bool
	d    *data
	// binds are the bindings this transaction made, published on commit;
	// kept apart from d so DiscardWrites keeps them.
	binds map[string]string
}

var _ ports.PushTx = (*pushTx)(nil)

// begin locks the transaction for one call and checks it is still open.
func (tx *pushTx) begin(ctx context.Context) error {
	tx.mu.Lock()
	if tx.done {
		tx.mu.Unlock()
		return syncerr.Newf(syncerr.InternalError, "push transaction already finished")
	}
	if err := ctxErr(ctx); err != nil {
		tx.mu.Unlock()
		return err
	}
	return nil
}

func (tx *pushTx) table(name string) (*schema.Table, error) {
	t := tx.schema.Table(name)
	if t == nil {
		return nil, syncerr.Newf(syncerr.UnknownTable, "table %q is not in the ensured schema", name)
	}
	return t, nil
}

func (tx *pushTx) Partition() string { return tx.partition }

func (tx *pushTx) ReadServeGate(ctx context.Context) (checkpoint.ServeGate, error) {
	if err := tx.begin(ctx); err != nil {
		return checkpoint.ServeGate{}, err
	}
	defer tx.mu.Unlock()
	tx.s.db.mu.Lock()
	defer tx.s.db.mu.Unlock()
	return tx.s.db.gate(tx.partition, tx.opts.WriterVersion, tx.d), nil
}

func (tx *pushTx) BindClient(ctx context.Context, clientID string) (string, error) {
	if err := tx.begin(ctx); err != nil {
		return "", err
	}
	defer tx.mu.Unlock()
	if a, ok := tx.binds[clientID]; ok {
		return a, nil
	}
	tx.s.db.mu.Lock()
	a, ok := tx.s.db.part(tx.partition).bindings[clientID]
	tx.s.db.mu.Unlock()
	if ok {
		return a, nil
	}
	if tx.binds == nil {
		tx.binds = map[string]string{}
	}
	tx.binds[clientID] = tx.opts.ActorID
	return tx.opts.ActorID, nil
}

func (tx *pushTx) GetPushResult(ctx context.Context, clientID, clientCommitID string) (ports.PushRecord, bool, error) {
	if err := tx.begin(ctx); err != nil {
		return ports.PushRecord{}, false, err
	}
	defer tx.mu.Unlock()
	r, ok := tx.d.results[resultKey{clientID, clientCommitID}]
	r.Result = slices.Clone(r.Result)
	return r, ok, nil
}

func (tx *pushTx) GetRow(ctx context.Context, table, rowID string) (*commit.Row, error) {
	if err := tx.begin(ctx); err != nil {
		return nil, err
	}
	defer tx.mu.Unlock()
	if _, err := tx.table(table); err != nil {
		return nil, err
	}
	return getRow(tx.d, table, rowID), nil
}

func (tx *pushTx) TombstoneSeq(ctx context.Context, table, rowID string) (int64, bool, error) {
	if err := tx.begin(ctx); err != nil {
		return 0, false, err
	}
	defer tx.mu.Unlock()
	seq, ok := tx.d.tombstones[rowKey{table, rowID}]
	return seq, ok, nil
}

func (tx *pushTx) ScanRows(ctx context.Context, q ports.RowScan) ([]commit.Row, error) {
	if err := tx.begin(ctx); err != nil {
		return nil, err
	}
	defer tx.mu.Unlock()
	if _, err := tx.table(q.Table); err != nil {
		return nil, err
	}
	if err := checkScan(q); err != nil {
		return nil, err
	}
	return scanRows(tx.d, q), nil
}

func (tx *pushTx) Lookup(ctx context.Context, q ports.RowLookup) ([]commit.Row, error) {
	if err := tx.begin(ctx); err != nil {
		return nil, err
	}
	defer tx.mu.Unlock()
	t, err := tx.table(q.Table)
	if err != nil {
		return nil, err
	}
	if !t.Materialize {
		return nil, syncerr.Newf(syncerr.StorageIndexNotFound, "table %q has no materialized columns", q.Table)
	}
	if len(q.Equals) == 0 {
		return nil, syncerr.Newf(syncerr.StorageIndexValueCount, "lookup on %q without values", q.Table)
	}
	if q.Limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "limit %d", q.Limit)
	}
	type cond struct {
		idx int
		key string
	}
	var conds []cond
	for col, v := range q.Equals {
		i := t.ColumnIndex(col)
		if i < 0 {
			return nil, syncerr.Newf(syncerr.StorageIndexNotFound, "table %q has no column %q", q.Table, col)
		}
		k, ok := valueKey(v)
		if !ok { // = NULL never matches
			return nil, nil
		}
		conds = append(conds, cond{i, k})
	}
	rt := tx.d.tables[q.Table]
	if rt == nil {
		return nil, nil
	}
	var out []commit.Row
	for _, id := range rt.sortedIDs() {
		r := rt.rows[id]
		ok := true
		for _, c := range conds {
			if c.idx >= len(r.values) {
				ok = false
				break
			}
			k, nonNull := valueKey(r.values[c.idx])
			if !nonNull || k != c.key {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, copyRow(r.row))
			if len(out) == q.Limit {
				break
			}
		}
	}
	return out, nil
}

// valueKey renders a cell for equality; ok is false for NULL.
func valueKey(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return "s:" + x, true
	case []byte:
		if x == nil {
			return "", false
		}
		return "b:" + string(x), true
	case int:
		return fmt.Sprintf("i:%d", x), true
	case int32:
		return fmt.Sprintf("i:%d", x), true
	case int64:
		return fmt.Sprintf("i:%d", x), true
	case float64:
		return fmt.Sprintf("f:%v", x), true
	case bool:
		if x {
			return "i:1", true
		}
		return "i:0", true
	default:
		return fmt.Sprintf("?:%v", x), true
	}
}

func uniqueKey(t *schema.Table, ix schema.Index, values []any) (string, bool) {
	parts := make([]string, 0, len(ix.Columns))
	for _, c := range ix.Columns {
		i := t.ColumnIndex(c)
		if i < 0 || i >= len(values) {
			return "", false
		}
		k, ok := valueKey(values[i])
		if !ok {
			return "", false // NULLs never collide
		}
		parts = append(parts, k)
	}
	return strings.Join(parts, "\x00"), true
}

func (tx *pushTx) UpsertRow(ctx context.Context, table string, w ports.RowWrite) error {
	if err := tx.begin(ctx); err != nil {
		return err
	}
	defer tx.mu.Unlock()
	t, err := tx.table(table)
	if err != nil {
		return err
	}
	tx.s.db.mu.Lock()
	phys := tx.s.db.tables[table]
	tx.s.db.mu.Unlock()
	if phys == nil {
		return syncerr.Newf(syncerr.InternalError, "table %q does not exist", table)
	}
	if w.Payload == nil {
		return &ports.ConstraintError{OpIndex: w.OpIndex, Table: table, Kind: "not_null"}
	}
	values := slices.Clone(w.Values)
	if t.Materialize {
		if len(values) != len(t.Columns) {
			return syncerr.Newf(syncerr.InternalError, "table %q: %d values for %d columns", table, len(values), len(t.Columns))
		}
		for i, c := range t.Columns {
			if values[i] == nil && phys.notNull[c.Name] {
				return &ports.ConstraintError{OpIndex: w.OpIndex, Table: table, Kind: "not_null"}
			}
		}
	}
	rt := tx.d.tables[table]
	if rt == nil {
		rt = &rowTable{rows: map[string]*storedRow{}, unique: map[string]map[string]string{}}
		tx.d.tables[table] = rt
	}
	if t.Materialize {
		for _, ix := range t.Indexes {
			if !ix.Unique {
				continue
			}
			if k, ok := uniqueKey(t, ix, values); ok {
				if owner, taken := rt.unique[ix.Name][k]; taken && owner != w.RowID {
					return &ports.ConstraintError{OpIndex: w.OpIndex, Table: table, Kind: "unique"}
				}
			}
		}
	}
	old := rt.rows[w.RowID]
	if old != nil {
		dropUnique(t, rt, old)
	} else {
		rt.sorted = nil
	}
	r := &storedRow{
		row: commit.Row{
			RowID:          w.RowID,
			Version:        w.Version,
			Scopes:         copyScopes(w.Scopes),
			Payload:        slices.Clone(w.Payload),
			ColumnVersions: slices.Clone(w.ColumnVersions),
		},
		values: values,
	}
	rt.rows[w.RowID] = r
	addUnique(t, rt, r)
	delete(tx.d.tombstones, rowKey{table, w.RowID})
	return nil
}

func dropUnique(t *schema.Table, rt *rowTable, r *storedRow) {
	if !t.Materialize {
		return
	}
	for _, ix := range t.Indexes {
		if !ix.Unique {
			continue
		}
		if k, ok := uniqueKey(t, ix, r.values); ok && rt.unique[ix.Name][k] == r.row.RowID {
			delete(rt.unique[ix.Name], k)
		}
	}
}

func addUnique(t *schema.Table, rt *rowTable, r *storedRow) {
	if !t.Materialize {
		return
	}
	for _, ix := range t.Indexes {
		if !ix.Unique {
			continue
		}
		if k, ok := uniqueKey(t, ix, r.values); ok {
			if rt.unique[ix.Name] == nil {
				rt.unique[ix.Name] = map[string]string{}
			}
			rt.unique[ix.Name][k] = r.row.RowID
		}
	}
}

func (tx *pushTx) DeleteRow(ctx context.Context, table, rowID string, opIndex int) error {
	if err := tx.begin(ctx); err != nil {
		return err
	}
	defer tx.mu.Unlock()
	t, err := tx.table(table)
	if err != nil {
		return err
	}
	if rt := tx.d.tables[table]; rt != nil {
		if old := rt.rows[rowID]; old != nil {
			dropUnique(t, rt, old)
			delete(rt.rows, rowID)
			rt.sorted = nil
		}
	}
	delete(tx.d.blobRefs, rowKey{table, rowID})
	return nil
}

func (tx *pushTx) SetBlobRefs(ctx context.Context, table, rowID string, blobIDs []string) error {
	if err := tx.begin(ctx); err != nil {
		return err
	}
	defer tx.mu.Unlock()
	if _, err := tx.table(table); err != nil {
		return err
	}
	k := rowKey{table, rowID}
	if len(blobIDs) == 0 {
		delete(tx.d.blobRefs, k)
		return nil
	}
	ids := slices.Clone(blobIDs)
	slices.Sort(ids)
	tx.d.blobRefs[k] = slices.Compact(ids)
	return nil
}

func (tx *pushTx) ClaimOrphanBlobs(ctx context.Context, blobIDs []string, nowMs int64) ([]string, error) {
	if err := tx.begin(ctx); err != nil {
		return nil, err
	}
	defer tx.mu.Unlock()
	referenced := map[string]bool{}
	for _, ids := range tx.d.blobRefs {
		for _, id := range ids {
			referenced[id] = true
		}
	}
	var out []string
	for _, id := range blobIDs {
		if referenced[id] {
			continue
		}
		if _, ok := tx.d.blobClaims[id]; !ok {
			tx.d.blobClaims[id] = nowMs
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (tx *pushTx) BlobClaimed(ctx context.Context, blobID string) (bool, error) {
	if err := tx.begin(ctx); err != nil {
		return false, err
	}
	defer tx.mu.Unlock()
	_, ok := tx.d.blobClaims[blobID]
	return ok, nil
}

func (tx *pushTx) AppendCommit(ctx context.Context, c ports.NewCommit) (int64, error) {
	if err := tx.begin(ctx); err != nil {
		return 0, err
	}
	defer tx.mu.Unlock()
	wv := tx.opts.WriterVersion
	if !checkpoint.FenceAllows(tx.d.fence, tx.d.hasFence, &wv) {
		return 0, syncerr.Newf(syncerr.StorageWriterFenceRejected,
			"writer version %d below the partition's fence %d", wv, tx.d.fence)
	}
	seq := tx.d.maxSeq + 1
	rec := &commitRec{
		c: commit.Commit{
			Seq:            seq,
			CreatedAtMs:    c.CreatedAtMs,
			ActorID:        c.ActorID,
			ClientID:       c.ClientID,
			ClientCommitID: c.ClientCommitID,
			Changes:        make([]commit.Change, len(c.Changes)),
		},
		writerVersion: wv,
	}
	for i, ch := range c.Changes {
		rec.c.Changes[i] = copyChange(ch)
		if ch.Op == commit.OpDelete {
			tx.d.tombstones[rowKey{ch.Table, ch.RowID}] = seq
		}
	}
	tx.d.maxSeq = seq
	tx.d.commits = append(tx.d.commits, rec)
	return seq, nil
}

func (tx *pushTx) EnqueueReactions(ctx context.Context, src ports.ReactionSource, rs []ports.Reaction) error {
	if err := tx.begin(ctx); err != nil {
		return err
	}
	defer tx.mu.Unlock()
	for _, r := range rs {
		if _, dup := tx.d.reactions[r.IdempotencyKey]; dup {
			return syncerr.Newf(syncerr.InternalError, "reaction %q already enqueued", r.IdempotencyKey)
		}
	}
	for _, r := range rs {
		avail := r.AvailableAtMs
		if avail == 0 {
			avail = src.CreatedAtMs
		}
		tx.d.reactions[r.IdempotencyKey] = &ports.StoredReaction{
			Partition:      tx.partition,
			IdempotencyKey: r.IdempotencyKey,
			Type:           r.Type,
			Version:        r.Version,
			Payload:        slices.Clone(r.Payload),
			Source:         src,
			Status:         ports.ReactionPending,
			MaxAttempts:    r.MaxAttempts,
			AvailableAtMs:  avail,
		}
	}
	return nil
}

func (tx *pushTx) PutPushResult(ctx context.Context, clientID, clientCommitID string, result []byte) ([]byte, error) {
	if err := tx.begin(ctx); err != nil {
		return nil, err
	}
	defer tx.mu.Unlock()
	k := resultKey{clientID, clientCommitID}
	if r, ok := tx.d.results[k]; ok {
		return slices.Clone(r.Result), nil
	}
	tx.d.results[k] = ports.PushRecord{Result: slices.Clone(result), ActorID: tx.opts.ActorID}
	return slices.Clone(result), nil
}

func (tx *pushTx) DiscardWrites(ctx context.Context) error {
	if err := tx.begin(ctx); err != nil {
		return err
	}
	defer tx.mu.Unlock()
	tx.s.db.mu.Lock()
	tx.d = tx.s.db.part(tx.partition).d.clone()
	tx.s.db.mu.Unlock()
	return nil
}

func (tx *pushTx) AdvanceCheckpoint(ctx context.Context, a ports.CheckpointAdvance) (bool, error) {
	if err := tx.begin(ctx); err != nil {
		return false, err
	}
	defer tx.mu.Unlock()
	if a.Partition != "" && a.Partition != tx.partition {
		return false, syncerr.Newf(syncerr.InternalError, "checkpoint of partition %q advanced in a transaction of %q", a.Partition, tx.partition)
	}
	cp, ok := checkpoint.Advance(tx.d.checkpoints[a.Name], a.OwnerEpoch, a.Watermark, a.ObservedRows, a.Cursor, a.NowMs)
	if ok {
		tx.d.checkpoints[a.Name] = &cp
	}
	return ok, nil
}

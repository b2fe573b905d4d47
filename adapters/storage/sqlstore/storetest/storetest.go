// Package storetest holds the engine tests shared by the SQLite and
// PostgreSQL adapters: behaviour the storage contract suite does not reach
// (migration payload rewrites, raw-SQL fence and layout tampering, query
// plans) and the benchmarks of the hot paths.
package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Engine opens stores for the shared tests.
type Engine struct {
	// Open returns a store over a fresh database; Reopen a second store
	// over the same database.
	Open   func(t testing.TB) *sqlstore.Store
	Reopen func(t testing.TB, s *sqlstore.Store) *sqlstore.Store
	// Exec runs raw SQL ('?' placeholders) outside storage transactions.
	Exec func(ctx context.Context, s *sqlstore.Store, query string, args ...any) error
	// Plans returns the plan lines of the statements serving a window read
	// and a row scan.
	Plans func(ctx context.Context, s *sqlstore.Store, partition string, w ports.CommitWindow, q ports.RowScan) ([]string, error)
	// FullScan reports whether a plan line is a full scan of a big table.
	FullScan func(line string) bool
}

// IR is the schema the shared tests use (version 1).
const IR = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{"version": 1, "migrations": []}],
  "tables": [
    {"name": "items", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "org", "type": "string", "nullable": false},
       {"name": "title", "type": "string", "nullable": false},
       {"name": "n", "type": "integer", "nullable": true},
       {"name": "ok", "type": "boolean", "nullable": false},
       {"name": "meta", "type": "json", "nullable": true}],
     "scopes": ["org:{org}"],
     "indexes": [{"name": "items_title", "columns": ["title"], "unique": true}]}
  ],
  "subscriptions": []
}`

// IRv2 appends a nullable column to items.
const IRv2 = `{
  "irVersion": 1, "schemaVersion": 2,
  "schemaVersions": [{"version": 1, "migrations": []}, {"version": 2, "migrations": []}],
  "tables": [
    {"name": "items", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "org", "type": "string", "nullable": false},
       {"name": "title", "type": "string", "nullable": false},
       {"name": "n", "type": "integer", "nullable": true},
       {"name": "ok", "type": "boolean", "nullable": false},
       {"name": "meta", "type": "json", "nullable": true},
       {"name": "extra", "type": "string", "nullable": true}],
     "scopes": ["org:{org}"],
     "indexes": [{"name": "items_title", "columns": ["title"], "unique": true}]}
  ],
  "subscriptions": []
}`

// Schema compiles ir.
func Schema(t testing.TB, ir string) *schema.Schema {
	t.Helper()
	s, err := schema.Load([]byte(ir))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Item builds a row write of items. The payload is a 6-column full row
// whose bitmap marks n and meta NULL.
func Item(id, org string, op int) ports.RowWrite {
	vals := []any{id, org, "t-" + id, nil, true, nil}
	payload := []byte{0b00101000}
	for _, s := range []string{id, org, "t-" + id} {
		payload = append(payload, byte(len(s)), 0, 0, 0)
		payload = append(payload, s...)
	}
	payload = append(payload, 1)
	return ports.RowWrite{RowID: id, Version: 1, Scopes: map[string]string{"org": org}, Payload: payload, Values: vals, OpIndex: op}
}

// Change is the log change of an item write.
func Change(w ports.RowWrite) commit.Change {
	return commit.Change{Table: "items", RowID: w.RowID, Op: commit.OpUpsert, RowVersion: w.Version, Scopes: w.Scopes, Row: w.Payload}
}

// Open returns a store ensured at IR.
func (e Engine) open(t testing.TB) *sqlstore.Store {
	s := e.Open(t)
	if err := s.EnsureSchema(context.Background(), Schema(t, IR), nil); err != nil {
		t.Fatalf("EnsureSchema: %v", err)
	}
	return s
}

// PushItems upserts items and appends one commit.
func PushItems(ctx context.Context, s ports.Storage, partition string, ws []ports.RowWrite, cc string) (int64, error) {
	var seq int64
	err := s.Push(ctx, partition, ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		changes := make([]commit.Change, len(ws))
		for i, w := range ws {
			if err := tx.UpsertRow(ctx, "items", w); err != nil {
				return err
			}
			changes[i] = Change(w)
		}
		var err error
		seq, err = tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1000, ActorID: "a", ClientID: "c", ClientCommitID: cc, Changes: changes})
		if err != nil {
			return err
		}
		_, err = tx.PutPushResult(ctx, "c", cc, []byte(`{"status":"applied"}`))
		return err
	})
	return seq, err
}

// Run runs the shared engine tests.
func Run(t *testing.T, e Engine) {
	t.Run("basic", func(t *testing.T) { basic(t, e) })
	t.Run("read_then_write", func(t *testing.T) { readThenWrite(t, e) })
	t.Run("concurrent", func(t *testing.T) { concurrent(t, e) })
	t.Run("rollback_and_discard", func(t *testing.T) { rollback(t, e) })
	t.Run("constraint", func(t *testing.T) { constraint(t, e) })
	t.Run("constraint_kinds", func(t *testing.T) { constraintKinds(t, e) })
	t.Run("fence", func(t *testing.T) { fence(t, e) })
	t.Run("layout", func(t *testing.T) { layout(t, e) })
	t.Run("migrate", func(t *testing.T) { migrate(t, e) })
	t.Run("migrate_ddl", func(t *testing.T) { migrateDDL(t, e) })
	t.Run("upgrade_client_bindings", func(t *testing.T) { upgradeClientBindings(t, e) })
	t.Run("upgrade_checkpoint_cursor", func(t *testing.T) { upgradeCheckpointCursor(t, e) })
	t.Run("checkpoints", func(t *testing.T) { checkpoints(t, e) })
	t.Run("prune", func(t *testing.T) { prune(t, e) })
	t.Run("plans", func(t *testing.T) { plans(t, e) })
	t.Run("concurrent_ensure", func(t *testing.T) { concurrentEnsure(t, e) })
	t.Run("migration_barrier", func(t *testing.T) { migrationBarrier(t, e) })
}

// readThenWrite: a push that reads a row under the lock and then writes
// it (what the applier does) leaves the row's scope index and tombstone
// as a blind write would, whatever the read found: a new row, the same
// scopes, moved scopes, a deleted row written again.
func readThenWrite(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	write := func(id, org string) {
		t.Helper()
		must(t, s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
			if _, err := tx.GetRow(ctx, "items", id); err != nil {
				return err
			}
			w := Item(id, org, 0)
			if err := tx.UpsertRow(ctx, "items", w); err != nil {
				return err
			}
			_, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", Changes: []commit.Change{Change(w)}})
			return err
		}))
	}
	remove := func(id string) {
		t.Helper()
		must(t, s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
			if _, err := tx.GetRow(ctx, "items", id); err != nil {
				return err
			}
			if err := tx.DeleteRow(ctx, "items", id, 0); err != nil {
				return err
			}
			_, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a",
				Changes: []commit.Change{{Table: "items", RowID: id, Op: commit.OpDelete, Scopes: map[string]string{"org": "a"}}}})
			return err
		}))
	}
	scanned := func(org string) []string {
		t.Helper()
		rows, err := s.ScanRows(ctx, "p", ports.RowScan{Table: "items", ScopeFilter: map[string][]string{"org": {org}}, Limit: 10})
		must(t, err)
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.RowID)
		}
		return ids
	}
	for _, step := range []struct {
		name      string
		do        func()
		a, b      []string
		tombstone bool
	}{
		{"a new row is indexed under its scope", func() { write("x", "a") }, []string{"x"}, nil, false},
		{"the same scopes keep it there", func() { write("x", "a") }, []string{"x"}, nil, false},
		{"moved scopes move it", func() { write("x", "b") }, nil, []string{"x"}, false},
		{"moved back", func() { write("x", "a") }, []string{"x"}, nil, false},
		{"a delete unindexes it and keeps a tombstone", func() { remove("x") }, nil, nil, true},
		{"written again it is indexed and its tombstone cleared", func() { write("x", "a") }, []string{"x"}, nil, false},
	} {
		step.do()
		if got := scanned("a"); fmt.Sprint(got) != fmt.Sprint(step.a) {
			t.Fatalf("%s: under org a %v, want %v", step.name, got, step.a)
		}
		if got := scanned("b"); fmt.Sprint(got) != fmt.Sprint(step.b) {
			t.Fatalf("%s: under org b %v, want %v", step.name, got, step.b)
		}
		must(t, s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
			_, ok, err := tx.TombstoneSeq(ctx, "items", "x")
			if err == nil && ok != step.tombstone {
				err = fmt.Errorf("%s: tombstone kept %v, want %v", step.name, ok, step.tombstone)
			}
			return err
		}))
	}
}

// migrationBarrier: while a schema bump holds the migration lock (on
// PostgreSQL LOCK TABLE sync_partitions IN EXCLUSIVE MODE; on SQLite the
// write lock) and raises the fence, an unaware writer blocks at its
// partition lock and, once the bump commits, is refused by the fence.
func migrationBarrier(t *testing.T, e Engine) {
	ctx := context.Background()
	old := e.open(t)
	_, err := PushItems(ctx, old, "p", []ports.RowWrite{Item("b0", "a", 0)}, "b0")
	must(t, err)
	bump, err := old.DB().DB.BeginTx(ctx, nil)
	must(t, err)
	defer func() { _ = bump.Rollback() }()
	if old.Dialect().Name() == "postgres" {
		_, err = bump.ExecContext(ctx, "LOCK TABLE sync_partitions IN EXCLUSIVE MODE")
		must(t, err)
	}
	_, err = bump.ExecContext(ctx, old.Dialect().Rebind("INSERT INTO sync_writer_fence(partition, required_writer_version) VALUES (?, ?)"), "p", 2)
	must(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := PushItems(ctx, old, "p", []ports.RowWrite{Item("b1", "a", 0)}, "b1")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the old writer was not blocked by the migration: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	must(t, bump.Commit())
	select {
	case err := <-done:
		wantCode(t, err, syncerr.StorageWriterFenceRejected)
	case <-time.After(10 * time.Second):
		t.Fatal("the old writer stayed blocked after the migration committed")
	}
}

// concurrentEnsure starts several processes on one fresh database at once:
// exactly one migrates, the others see its marker, and all serve.
func concurrentEnsure(t *testing.T, e Engine) {
	ctx := context.Background()
	first := e.Open(t)
	stores := []*sqlstore.Store{first, e.Reopen(t, first), e.Reopen(t, first)}
	errs := make(chan error, len(stores))
	for _, s := range stores {
		go func(s *sqlstore.Store) { errs <- s.EnsureSchema(ctx, Schema(t, IR), nil) }(s)
	}
	for range stores {
		must(t, <-errs)
	}
	for i, s := range stores {
		_, err := PushItems(ctx, s, "p", []ports.RowWrite{Item(fmt.Sprint("ce", i), "a", 0)}, fmt.Sprint("ce", i))
		must(t, err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantCode(t testing.TB, err error, code syncerr.Code) *syncerr.Error {
	t.Helper()
	var se *syncerr.Error
	if !errors.As(err, &se) || se.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	return se
}

func basic(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	epoch, err := s.TouchPartition(ctx, "p", 1)
	must(t, err)
	if epoch2, _ := s.TouchPartition(ctx, "p", 2); epoch2 != epoch {
		t.Fatalf("epoch changed on touch: %q %q", epoch, epoch2)
	}
	var ws []ports.RowWrite
	for i := 0; i < 5; i++ {
		ws = append(ws, Item(fmt.Sprintf("r%d", i), []string{"a", "b"}[i%2], i))
	}
	seq, err := PushItems(ctx, s, "p", ws, "cc1")
	must(t, err)
	if seq != 1 {
		t.Fatalf("seq %d", seq)
	}
	row, err := s.GetRow(ctx, "p", "items", "r2")
	must(t, err)
	if row == nil || row.Version != 1 || row.Scopes["org"] != "a" || string(row.Payload) != string(ws[2].Payload) {
		t.Fatalf("row %+v", row)
	}
	rows, err := s.ScanRows(ctx, "p", ports.RowScan{Table: "items", ScopeFilter: map[string][]string{"org": {"a"}}, Limit: 2})
	must(t, err)
	if len(rows) != 2 || rows[0].RowID != "r0" || rows[1].RowID != "r2" {
		t.Fatalf("scan %+v", rows)
	}
	rows, err = s.ScanRows(ctx, "p", ports.RowScan{Table: "items", ScopeFilter: map[string][]string{"org": {"a", "b"}}, AfterRowID: "r1", Limit: 10})
	must(t, err)
	if len(rows) != 3 || rows[0].RowID != "r2" {
		t.Fatalf("scan after %+v", rows)
	}
	cs, err := s.ReadCommitWindow(ctx, "p", ports.CommitWindow{Table: "items", ScopeFilter: map[string][]string{"org": {"b"}}, ThroughSeq: 10, LimitChanges: 100})
	must(t, err)
	if len(cs) != 1 || len(cs[0].Changes) != 2 || cs[0].Changes[0].RowID != "r1" || cs[0].Seq != 1 || cs[0].ActorID != "a" {
		t.Fatalf("window %+v", cs)
	}
	res, ok, err := s.GetPushResult(ctx, "p", "c", "cc1")
	must(t, err)
	if !ok || string(res.Result) != `{"status":"applied"}` {
		t.Fatalf("push result %q %v", res.Result, ok)
	}
	b, err := s.LogBounds(ctx, "p")
	must(t, err)
	if b.MaxSeq != 1 {
		t.Fatalf("bounds %+v", b)
	}
	// Lookup by a materialized column, inside a transaction.
	must(t, s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		rs, err := tx.Lookup(ctx, ports.RowLookup{Table: "items", Equals: map[string]any{"title": "t-r3", "ok": true}, Limit: 5})
		if err != nil {
			return err
		}
		if len(rs) != 1 || rs[0].RowID != "r3" {
			return fmt.Errorf("lookup %+v", rs)
		}
		return nil
	}))
	// A second store over the same database at the same version.
	s2 := e.Reopen(t, s)
	must(t, s2.EnsureSchema(ctx, Schema(t, IR), nil))
}

func concurrent(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	const workers, per = 4, 5
	var wg sync.WaitGroup
	seqs := make(chan int64, workers*per)
	errs := make(chan error, workers*per)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				seq, err := PushItems(ctx, s, "p", []ports.RowWrite{Item(id, "a", 0)}, id)
				if err != nil {
					errs <- err
					return
				}
				seqs <- seq
			}
		}(w)
	}
	wg.Wait()
	close(seqs)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for s := range seqs {
		if seen[s] {
			t.Fatalf("duplicate seq %d", s)
		}
		seen[s] = true
	}
	for i := int64(1); i <= workers*per; i++ {
		if !seen[i] {
			t.Fatalf("gap at %d", i)
		}
	}
}

func rollback(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	boom := errors.New("boom")
	err := s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		w := Item("x", "a", 0)
		must(t, tx.UpsertRow(ctx, "items", w))
		must(t, tx.SetBlobRefs(ctx, "items", "x", []string{"b1"}))
		seq, err := tx.AppendCommit(ctx, ports.NewCommit{ActorID: "a", ClientID: "c", ClientCommitID: "x", Changes: []commit.Change{Change(w)}})
		must(t, err)
		must(t, tx.EnqueueReactions(ctx, ports.ReactionSource{ClientID: "c", ClientCommitID: "x", CommitSeq: seq},
			[]ports.Reaction{{IdempotencyKey: "k", Type: "t", Version: 1, Payload: []byte(`{}`), MaxAttempts: 3}}))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("push error %v", err)
	}
	for _, tbl := range []string{"items", "sync_changes", "sync_change_scopes", "sync_row_scopes", "sync_blob_refs", "sync_reactions", "sync_commits"} {
		assertEmpty(t, e, s, tbl)
	}
	// DiscardWrites keeps the lock and drops staged writes.
	must(t, s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		must(t, tx.UpsertRow(ctx, "items", Item("y", "a", 0)))
		must(t, tx.DiscardWrites(ctx))
		if r, err := tx.GetRow(ctx, "items", "y"); err != nil || r != nil {
			t.Fatalf("row after discard: %v %v", r, err)
		}
		_, err := tx.PutPushResult(ctx, "c", "rej", []byte(`{"status":"rejected"}`))
		return err
	}))
	assertEmpty(t, e, s, "items")
	if _, ok, _ := s.GetPushResult(ctx, "p", "c", "rej"); !ok {
		t.Fatal("rejection result not persisted")
	}
	// First writer wins.
	must(t, s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		got, err := tx.PutPushResult(ctx, "c", "rej", []byte(`{"status":"other"}`))
		if err == nil && string(got) != `{"status":"rejected"}` {
			t.Fatalf("second writer got %s", got)
		}
		return err
	}))
}

func assertEmpty(t *testing.T, e Engine, s *sqlstore.Store, table string) {
	t.Helper()
	var n int
	must(t, s.DB().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n))
	if n != 0 {
		t.Fatalf("%s has %d rows after rollback", table, n)
	}
}

func constraint(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	_, err := PushItems(ctx, s, "p", []ports.RowWrite{Item("a1", "a", 0)}, "c1")
	must(t, err)
	dup := Item("a2", "a", 3)
	dup.Values[2] = "t-a1" // the unique title index
	err = s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		return tx.UpsertRow(ctx, "items", dup)
	})
	var ce *ports.ConstraintError
	if !errors.As(err, &ce) || ce.OpIndex != 3 || ce.Kind != "unique" || ce.Table != "items" {
		t.Fatalf("got %v, want unique ConstraintError at 3", err)
	}
	bad := Item("a3", "a", 1)
	bad.Values[2] = nil
	err = s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		err := tx.UpsertRow(ctx, "items", bad)
		if err == nil {
			// A pipelining engine reports the write's failure with the
			// next read.
			_, err = tx.GetRow(ctx, "items", "a1")
		}
		if err != nil {
			var ce *ports.ConstraintError
			if !errors.As(err, &ce) || ce.Kind != "not_null" {
				t.Fatalf("got %v, want not_null", err)
			}
			// The transaction stays usable after DiscardWrites.
			if err := tx.DiscardWrites(ctx); err != nil {
				return err
			}
			_, err = tx.PutPushResult(ctx, "c", "bad", []byte(`{"status":"rejected"}`))
			return err
		}
		return errors.New("no constraint error")
	})
	must(t, err)
}

// constraintKinds: the dialect classifies the engine's own errors for
// every relational constraint (foreign keys are enforced on the write
// connections) and leaves anything else unclassified.
func constraintKinds(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	for _, ddl := range []string{
		"CREATE TABLE ck_parent(id TEXT PRIMARY KEY)",
		"CREATE TABLE ck_child(id TEXT PRIMARY KEY, parent TEXT REFERENCES ck_parent(id), v INTEGER NOT NULL CHECK (v > 0))",
		"INSERT INTO ck_parent(id) VALUES ('p')",
		"INSERT INTO ck_child(id, parent, v) VALUES ('c', 'p', 1)",
	} {
		must(t, e.Exec(ctx, s, ddl))
	}
	tests := []struct {
		name, stmt, kind string
	}{
		{"unique", "INSERT INTO ck_child(id, parent, v) VALUES ('c', 'p', 1)", "unique"},
		{"foreign_key", "INSERT INTO ck_child(id, parent, v) VALUES ('d', 'missing', 1)", "foreign_key"},
		{"foreign_key_restrict", "DELETE FROM ck_parent WHERE id='p'", "foreign_key"},
		{"not_null", "INSERT INTO ck_child(id, parent, v) VALUES ('e', 'p', NULL)", "not_null"},
		{"check", "INSERT INTO ck_child(id, parent, v) VALUES ('f', 'p', 0)", "check"},
		{"syntax", "INSERT INTO ck_child VALUES (", ""},
		{"missing_table", "INSERT INTO ck_nothing(id) VALUES ('x')", ""},
	}
	if s.Dialect().Name() == "sqlite" {
		must(t, e.Exec(ctx, s, "CREATE TRIGGER ck_abort BEFORE INSERT ON ck_parent WHEN NEW.id='abort' BEGIN SELECT RAISE(ABORT, 'nope'); END"))
		tests = append(tests, struct{ name, stmt, kind string }{"trigger_abort", "INSERT INTO ck_parent(id) VALUES ('abort')", ""})
	} else {
		tests = append(tests, struct{ name, stmt, kind string }{"division_by_zero", "SELECT 1/0", ""})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.Exec(ctx, s, tt.stmt)
			if err == nil {
				t.Fatal("statement succeeded")
			}
			kind, ok := s.Dialect().ConstraintKind(err)
			if ok != (tt.kind != "") || kind != tt.kind {
				t.Fatalf("ConstraintKind(%v) = %q, %v; want %q", err, kind, ok, tt.kind)
			}
			if s.Dialect().FenceRejected(err) {
				t.Fatalf("FenceRejected(%v) = true", err)
			}
		})
	}
}

func fence(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	ins := "INSERT INTO sync_commits(partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) VALUES (?, ?, 'c', 'x', 'a', 0, ?)"
	must(t, e.Exec(ctx, s, ins, "p", 1, nil)) // no fence: allowed
	_, err := s.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: "p", Name: "cp", SchemaVersion: 2}, 1)
	must(t, err)
	if err := e.Exec(ctx, s, ins, "p", 2, nil); err == nil {
		t.Fatal("NULL writer_version accepted under a fence")
	}
	if err := e.Exec(ctx, s, ins, "p", 3, 1); err == nil {
		t.Fatal("lower writer_version accepted under a fence")
	}
	must(t, e.Exec(ctx, s, ins, "p", 4, 2))
	must(t, e.Exec(ctx, s, ins, "q", 1, nil)) // other partition: no fence
	_, err = PushItems(ctx, s, "p", []ports.RowWrite{Item("f", "a", 0)}, "f")
	wantCode(t, err, syncerr.StorageWriterFenceRejected)
}

func layout(t *testing.T, e Engine) {
	ctx := context.Background()
	for _, c := range []struct {
		name, stmt, reason, column string
	}{
		{"drop_column", `ALTER TABLE items DROP COLUMN _sync_column_versions`, "missing_column", "_sync_column_versions"},
		{"drop_table", `DROP TABLE items`, "missing_table", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := e.open(t)
			must(t, e.Exec(ctx, s, c.stmt))
			before := snapshot(t, s)
			s2 := e.Reopen(t, s)
			err := s2.EnsureSchema(ctx, Schema(t, IR), nil)
			se := wantCode(t, err, syncerr.StoragePhysicalLayoutMismatch)
			if !strings.Contains(string(se.Details), `"reason":"`+c.reason+`"`) || !strings.Contains(string(se.Details), c.column) {
				t.Fatalf("details %s", se.Details)
			}
			sameSnapshot(t, before, snapshot(t, s))
		})
	}
	t.Run("stored_layout", func(t *testing.T) {
		s := e.open(t)
		must(t, e.Exec(ctx, s, `UPDATE sync_schema_meta SET layouts=? WHERE id=1`, `{"items":[{"name":"id","type":"string","nullable":false}]}`))
		before := snapshot(t, s)
		err := e.Reopen(t, s).EnsureSchema(ctx, Schema(t, IR), nil)
		se := wantCode(t, err, syncerr.StorageStoredLayoutMismatch)
		if string(se.Details) != `{"column":"org","table":"items"}` {
			t.Fatalf("details %s", se.Details)
		}
		sameSnapshot(t, before, snapshot(t, s))
	})
	t.Run("too_new", func(t *testing.T) {
		s := e.open(t)
		must(t, e.Exec(ctx, s, `UPDATE sync_schema_meta SET schema_version=9 WHERE id=1`))
		before := snapshot(t, s)
		wantCode(t, e.Reopen(t, s).EnsureSchema(ctx, Schema(t, IR), nil), syncerr.StorageSchemaTooNew)
		sameSnapshot(t, before, snapshot(t, s))
	})
	t.Run("checkpoint_incomplete", func(t *testing.T) {
		s := e.open(t)
		_, err := s.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: "p", Name: "cp", SchemaVersion: 1}, 1)
		must(t, err)
		before := snapshot(t, s)
		wantCode(t, e.Reopen(t, s).EnsureSchema(ctx, Schema(t, IR), nil), syncerr.StorageCheckpointIncomplete)
		sameSnapshot(t, before, snapshot(t, s))
	})
}

// snapshotTables are the tables a refused EnsureSchema must leave as they
// were: every core table and the app table.
var snapshotTables = []string{
	"sync_partitions", "sync_partition_registry", "sync_row_scopes", "sync_commits", "sync_changes",
	"sync_change_scopes", "sync_push_results", "sync_reactions", "sync_clients", "sync_blob_refs",
	"sync_tombstones", "sync_backfill_checkpoints", "sync_writer_fence", "sync_schema_meta", "sync_client_bindings", "sync_blob_claims", "items",
}

// snapshot renders the catalog (columns, indexes) and row counts of the
// snapshot tables, plus the schema marker, fences and checkpoints.
func snapshot(t *testing.T, s *sqlstore.Store) string {
	t.Helper()
	ctx := context.Background()
	db := s.DB().DB
	var b strings.Builder
	for _, name := range snapshotTables {
		cols, err := s.Dialect().TableColumns(ctx, db, name)
		must(t, err)
		ixs, err := s.Dialect().TableIndexes(ctx, db, name)
		must(t, err)
		fmt.Fprintf(&b, "%s %v %v", name, cols, ixs)
		if len(cols) > 0 {
			var n int
			must(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+name).Scan(&n))
			fmt.Fprintf(&b, " rows=%d", n)
		}
		b.WriteByte('\n')
	}
	for _, q := range []string{
		"SELECT schema_version, layouts FROM sync_schema_meta",
		"SELECT partition, required_writer_version FROM sync_writer_fence ORDER BY partition",
		"SELECT partition, name, schema_version, state, watermark, owner_epoch, updated_at_ms FROM sync_backfill_checkpoints ORDER BY partition, name",
	} {
		rows, err := db.QueryContext(ctx, q)
		must(t, err)
		cols, err := rows.Columns()
		must(t, err)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			must(t, rows.Scan(ptrs...))
			for _, v := range vals {
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%v|", v)
			}
			b.WriteByte('\n')
		}
		must(t, rows.Err())
		_ = rows.Close()
	}
	return b.String()
}

func sameSnapshot(t *testing.T, before, after string) {
	t.Helper()
	if before != after {
		t.Fatalf("a refused EnsureSchema changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func migrate(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	w := Item("m1", "a", 0)
	_, err := PushItems(ctx, s, "p", []ports.RowWrite{w}, "m1")
	must(t, err)
	s2 := e.Reopen(t, s)
	decl := []checkpoint.Declaration{{Partition: "p", Name: "cp", SchemaVersion: 2}}
	must(t, s2.EnsureSchema(ctx, Schema(t, IRv2), decl))
	row, err := s2.GetRow(ctx, "p", "items", "m1")
	must(t, err)
	want, _ := sqlstore.AppendNullColumns(w.Payload, 6, 7)
	if row == nil || string(row.Payload) != string(want) {
		t.Fatalf("payload not rewritten: %x", row.Payload)
	}
	cps, err := s2.ReadCheckpoints(ctx, "p")
	must(t, err)
	if len(cps) != 1 || cps[0].State != checkpoint.StateDeclared {
		t.Fatalf("checkpoints %+v", cps)
	}
	// An older build refuses; a same-version process without the declaration too.
	wantCode(t, e.Reopen(t, s).EnsureSchema(ctx, Schema(t, IR), nil), syncerr.StorageSchemaTooNew)
	wantCode(t, e.Reopen(t, s).EnsureSchema(ctx, Schema(t, IRv2), nil), syncerr.StorageCheckpointIncomplete)
	must(t, e.Reopen(t, s).EnsureSchema(ctx, Schema(t, IRv2), decl))
}

// migrateDDL: a version bump changes the catalog as the schema says: the
// added nullable column, a new table, indexes rebuilt (a removed one gone,
// a new one present), a retired table dropped with its scope-index, blob
// and tombstone entries.
func migrateDDL(t *testing.T, e Engine) {
	ctx := context.Background()
	table := func(name, cols, scopes, indexes string) string {
		return `{"name": "` + name + `", "primaryKey": "id", "columns": [` + cols + `], "scopes": [` + scopes + `], "indexes": [` + indexes + `]}`
	}
	str := func(n string, nullable bool) string {
		return fmt.Sprintf(`{"name": %q, "type": "string", "nullable": %v}`, n, nullable)
	}
	ir := func(v int, tables ...string) string {
		versions := `{"version": 1, "migrations": []}`
		if v == 2 {
			versions += `, {"version": 2, "migrations": []}`
		}
		return fmt.Sprintf(`{"irVersion": 1, "schemaVersion": %d, "schemaVersions": [%s], "tables": [%s], "subscriptions": []}`,
			v, versions, strings.Join(tables, ", "))
	}
	v1 := ir(1,
		table("items", str("id", false)+", "+str("org", false)+", "+str("title", false), `"org:{org}"`,
			`{"name": "items_title", "columns": ["title"]}`),
		table("gone", str("id", false)+", "+str("org", false), `"org:{org}"`, `{"name": "gone_org", "columns": ["org"]}`))
	v2 := ir(2,
		table("items", str("id", false)+", "+str("org", false)+", "+str("title", false)+", "+str("extra", true), `"org:{org}"`,
			`{"name": "items_extra", "columns": ["extra"]}`),
		table("fresh", str("id", false)+", "+str("org", false), `"org:{org}"`, ""))
	s := e.Open(t)
	must(t, s.EnsureSchema(ctx, Schema(t, v1), nil))
	row := func(vals ...string) []byte {
		b := []byte{0}
		for _, v := range vals {
			b = append(b, byte(len(v)), 0, 0, 0)
			b = append(b, v...)
		}
		return b
	}
	must(t, s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		if err := tx.UpsertRow(ctx, "gone", ports.RowWrite{RowID: "g1", Version: 1, Scopes: map[string]string{"org": "a"},
			Values: []any{"g1", "a"}, Payload: row("g1", "a")}); err != nil {
			return err
		}
		if err := tx.SetBlobRefs(ctx, "gone", "g1", []string{"sha256:" + strings.Repeat("0", 64)}); err != nil {
			return err
		}
		if err := tx.DeleteRow(ctx, "gone", "g2", 1); err != nil {
			return err
		}
		_, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "g",
			Changes: []commit.Change{{Table: "gone", RowID: "g2", Op: commit.OpDelete, Scopes: map[string]string{"org": "a"}}}})
		return err
	}))
	entries := func(db *sql.DB, idx string) int {
		var n int
		must(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+idx+" WHERE tbl='gone'").Scan(&n))
		return n
	}
	retired := []string{"sync_row_scopes", "sync_blob_refs", "sync_tombstones"}
	for _, idx := range retired {
		if entries(s.DB().DB, idx) == 0 {
			t.Fatalf("%s has no entry of gone before the bump", idx)
		}
	}
	s2 := e.Reopen(t, s)
	must(t, s2.EnsureSchema(ctx, Schema(t, v2), nil))
	db := s2.DB().DB
	cols := func(name string) []string {
		cs, err := s2.Dialect().TableColumns(ctx, db, name)
		must(t, err)
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	if got := cols("gone"); len(got) != 0 {
		t.Fatalf("retired table still has columns %v", got)
	}
	for _, idx := range retired {
		if n := entries(db, idx); n != 0 {
			t.Fatalf("%s keeps %d entries of the retired table", idx, n)
		}
	}
	if got := strings.Join(cols("items"), ","); !strings.HasSuffix(got, ",extra") {
		t.Fatalf("items columns after bump = %s", got)
	}
	if got := cols("fresh"); len(got) == 0 {
		t.Fatal("new table not created")
	}
	ixs, err := s2.Dialect().TableIndexes(ctx, db, "items")
	must(t, err)
	if got := strings.Join(ixs, ","); !strings.Contains(got, "sync_ix_items_extra") || strings.Contains(got, "sync_ix_items_title") {
		t.Fatalf("items indexes after bump = %s", got)
	}
}

// upgradeClientBindings: a database from before client-id bindings (no
// sync_client_bindings, no sync_push_results.actor_id) is upgraded by the
// next EnsureSchema: the table is created and filled once from what the
// database knows (pulled clients first, then the actors of the commits),
// the column is added, and the old results stay readable without owner.
func upgradeClientBindings(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	for _, q := range []string{
		"DROP TABLE sync_client_bindings",
		"ALTER TABLE sync_push_results DROP COLUMN actor_id",
		"INSERT INTO sync_clients(partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms) VALUES " +
			"('p', 'pulled', 'carol', 3, 0, '[]', 1), ('p', 'both', 'carol', 3, 0, '[]', 1)",
		"INSERT INTO sync_commits(partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) VALUES " +
			"('p', 1, 'pushed', 'k1', 'bob', 1, 1), ('p', 2, 'shared', 'k1', 'bob', 1, 1), ('p', 3, 'shared', 'k2', 'alice', 1, 1), " +
			"('p', 4, 'both', 'k1', 'bob', 1, 1), ('q', 1, 'pushed', 'k1', 'dave', 1, 1)",
		`INSERT INTO sync_push_results(partition, client_id, client_commit_id, result) VALUES ('p', 'pushed', 'k1', '{"status":"applied"}')`,
	} {
		must(t, e.Exec(ctx, s, q))
	}
	up := e.Reopen(t, s)
	must(t, up.EnsureSchema(ctx, Schema(t, IR), nil))
	for _, w := range []struct{ partition, client, actor string }{
		{"p", "pulled", "carol"}, {"p", "both", "carol"}, {"p", "pushed", "bob"}, {"p", "shared", "alice"}, {"q", "pushed", "dave"},
	} {
		if a, ok, err := up.ClientBinding(ctx, w.partition, w.client); err != nil || !ok || a != w.actor {
			t.Errorf("binding %s/%s = %q, %v, %v; want %s", w.partition, w.client, a, ok, err, w.actor)
		}
	}
	r, ok, err := up.GetPushResult(ctx, "p", "pushed", "k1")
	if err != nil || !ok || r.ActorID != "" || string(r.Result) != `{"status":"applied"}` {
		t.Fatalf("legacy result = %+v, %v, %v", r, ok, err)
	}
	must(t, up.Push(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "bob"}, func(tx ports.PushTx) error {
		_, err := tx.PutPushResult(ctx, "pushed", "k2", []byte(`{"status":"applied"}`))
		return err
	}))
	if r, _, _ := up.GetPushResult(ctx, "p", "pushed", "k2"); r.ActorID != "bob" {
		t.Fatalf("owner of a result stored after the upgrade = %q", r.ActorID)
	}
	// The fill runs once, when the table is created: a later start adds
	// nothing from the client records.
	must(t, e.Exec(ctx, s, "INSERT INTO sync_clients(partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms) VALUES ('p', 'late', 'erin', 3, 0, '[]', 1)"))
	again := e.Reopen(t, s)
	must(t, again.EnsureSchema(ctx, Schema(t, IR), nil))
	if a, ok, err := again.ClientBinding(ctx, "p", "late"); err != nil || ok {
		t.Fatalf("a later start filled bindings again: %q, %v, %v", a, ok, err)
	}
}

// upgradeCheckpointCursor: a database whose checkpoints predate the
// backfill cursor gets the column on the next start, its rows reading the
// empty cursor, and advances store one.
func upgradeCheckpointCursor(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	for _, q := range []string{
		"ALTER TABLE sync_backfill_checkpoints DROP COLUMN backfill_cursor",
		"INSERT INTO sync_backfill_checkpoints(partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms) " +
			"VALUES ('p', 'old', 1, 'backfilling', 4, 1, 9, 1)",
	} {
		must(t, e.Exec(ctx, s, q))
	}
	up := e.Reopen(t, s)
	must(t, up.EnsureSchema(ctx, Schema(t, IR), []checkpoint.Declaration{{Partition: "p", Name: "old", SchemaVersion: 1}}))
	cps, err := up.ReadCheckpoints(ctx, "p")
	must(t, err)
	if len(cps) != 1 || cps[0].Cursor != "" || cps[0].Watermark != 4 || cps[0].ObservedRows != 9 {
		t.Fatalf("after the upgrade: %+v", cps)
	}
	ok, err := up.AdvanceCheckpoint(ctx, ports.CheckpointAdvance{Partition: "p", Name: "old", OwnerEpoch: 1, Watermark: 5, ObservedRows: 10, Cursor: "scan:r9", NowMs: 2})
	if err != nil || !ok {
		t.Fatalf("advance = %v, %v", ok, err)
	}
	if cps, _ := up.ReadCheckpoints(ctx, "p"); cps[0].Cursor != "scan:r9" {
		t.Fatalf("cursor after advance = %+v", cps[0])
	}
}

func checkpoints(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	d := checkpoint.Declaration{Partition: "p", Name: "cp", SchemaVersion: 1}
	if _, err := s.ClaimCheckpoint(ctx, d, 1); syncerr.CodeOf(err) != syncerr.StorageCheckpointNotDeclared {
		t.Fatalf("claim undeclared: %v", err)
	}
	_, err := s.DeclareCheckpoint(ctx, d, 1)
	must(t, err)
	c1, err := s.ClaimCheckpoint(ctx, d, 2)
	must(t, err)
	c2, err := s.ClaimCheckpoint(ctx, d, 3)
	must(t, err)
	if c1.OwnerEpoch != 1 || c2.OwnerEpoch != 2 || c2.State != checkpoint.StateBackfilling {
		t.Fatalf("claims %+v %+v", c1, c2)
	}
	ok, err := s.AdvanceCheckpoint(ctx, ports.CheckpointAdvance{Partition: "p", Name: "cp", OwnerEpoch: 1, Watermark: 5, NowMs: 4})
	must(t, err)
	if ok {
		t.Fatal("superseded owner advanced")
	}
	seq, err := PushItems(ctx, s, "p", []ports.RowWrite{Item("c1", "a", 0)}, "c1")
	must(t, err)
	st, err := s.HasSourceChangesAbove(ctx, "p", []string{"items"}, 0)
	must(t, err)
	if st != checkpoint.SourceChanged {
		t.Fatalf("source state %s", st)
	}
	a := ports.CheckpointActivation{Partition: "p", Name: "cp", OwnerEpoch: 2, Watermark: 0, Sources: []string{"items"}, NowMs: 5}
	out, err := s.ActivateCheckpoint(ctx, a)
	must(t, err)
	if out != checkpoint.Stale {
		t.Fatalf("activation %s", out)
	}
	a.Watermark = seq
	out, err = s.ActivateCheckpoint(ctx, a)
	must(t, err)
	if out != checkpoint.Activated {
		t.Fatalf("activation %s", out)
	}
	if out, _ := s.ActivateCheckpoint(ctx, a); out != checkpoint.Stale {
		t.Fatalf("re-activation %s", out)
	}
	g, err := s.ReadServeGate(ctx, "p", 1)
	must(t, err)
	if g.StoredSchemaVersion != 1 || len(g.Pending) != 0 {
		t.Fatalf("gate %+v", g)
	}
}

func prune(t *testing.T, e Engine) {
	ctx := context.Background()
	s := e.open(t)
	epoch, err := s.TouchPartition(ctx, "p", 1)
	must(t, err)
	for i := 0; i < 3; i++ {
		_, err := PushItems(ctx, s, "p", []ports.RowWrite{Item(fmt.Sprintf("p%d", i), "a", 0)}, fmt.Sprintf("p%d", i))
		must(t, err)
	}
	_, err = s.PruneCommitsThrough(ctx, "p", ports.PruneRequest{LogEpoch: "stale", ThroughSeq: 2})
	wantCode(t, err, syncerr.StoragePruneEpochMismatch)
	res, err := s.PruneCommitsThrough(ctx, "p", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: 2})
	must(t, err)
	if res.HorizonSeq != 2 || res.RemovedCommits != 2 {
		t.Fatalf("prune %+v", res)
	}
	for _, tbl := range []string{"sync_change_scopes", "sync_changes", "sync_commits"} {
		var below, above int
		must(t, s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tbl+" WHERE commit_seq<=2").Scan(&below))
		must(t, s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tbl+" WHERE commit_seq>2").Scan(&above))
		if below != 0 || above == 0 {
			t.Fatalf("%s after prune: %d at or below the horizon, %d above", tbl, below, above)
		}
	}
	cs, err := s.ReadCommitWindow(ctx, "p", ports.CommitWindow{Table: "items", ScopeFilter: map[string][]string{"org": {"a"}}, ThroughSeq: 3, LimitChanges: 10})
	must(t, err)
	if len(cs) != 1 || cs[0].Seq != 3 {
		t.Fatalf("window after prune %+v", cs)
	}
	st, err := s.HasSourceChangesAbove(ctx, "p", []string{"items"}, 1)
	must(t, err)
	if st != checkpoint.SourceChanged {
		t.Fatalf("state %s", st)
	}
	st, _ = s.HasSourceChangesAbove(ctx, "p", []string{"other"}, 1)
	if st != checkpoint.SourceUnverifiable {
		t.Fatalf("state %s", st)
	}
}

func plans(t *testing.T, e Engine) {
	if e.Plans == nil {
		t.Skip("no plan hook")
	}
	ctx := context.Background()
	s := e.open(t)
	_, err := PushItems(ctx, s, "p", []ports.RowWrite{Item("x1", "a", 0), Item("x2", "b", 1)}, "x")
	must(t, err)
	for _, filter := range []map[string][]string{{"org": {"a"}}, {"org": {"a", "b"}}} {
		lines, err := e.Plans(ctx, s, "p",
			ports.CommitWindow{Table: "items", ScopeFilter: filter, ThroughSeq: 10, LimitChanges: 100},
			ports.RowScan{Table: "items", ScopeFilter: filter, Limit: 100})
		must(t, err)
		for _, l := range lines {
			if e.FullScan(l) {
				t.Errorf("full scan in plan: %s\n%s", l, strings.Join(lines, "\n"))
			}
		}
	}
}

// Opener builds Engine.Open and Engine.Reopen from a constructor and a
// source of fresh databases (a file path or a DSN).
func Opener(open func(ctx context.Context, where string) (*sqlstore.Store, error), fresh func(t testing.TB) string) (
	func(t testing.TB) *sqlstore.Store, func(t testing.TB, s *sqlstore.Store) *sqlstore.Store) {
	var mu sync.Mutex
	where := map[*sqlstore.Store]string{}
	at := func(t testing.TB, w string) *sqlstore.Store {
		t.Helper()
		s, err := open(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		mu.Lock()
		where[s] = w
		mu.Unlock()
		return s
	}
	reopen := func(t testing.TB, s *sqlstore.Store) *sqlstore.Store {
		mu.Lock()
		w := where[s]
		mu.Unlock()
		return at(t, w)
	}
	return func(t testing.TB) *sqlstore.Store { return at(t, fresh(t)) }, reopen
}

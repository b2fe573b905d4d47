package contract

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// schemaGroups are the schema case groups, in run order.
func schemaGroups() []group {
	return []group{
		{"EnsureSchema", []testCase{
			{"IdempotentAndShared", testEnsureIdempotent},
			{"RefusesNewerDatabase", testEnsureRefusesNewer},
			{"StoredLayoutMismatchColumn", testStoredLayoutMismatchColumn},
			{"StoredLayoutMismatchRetiredTable", testStoredLayoutMismatchTable},
			{"VersionBumpMigratesTables", testEnsureBump},
			{"VersionBumpInstallsDeclarations", testEnsureBumpInstallsDecls},
			{"VersionBumpFencesEveryPartition", testBumpFencesEveryPartition},
			{"VersionBumpNeverLowersAFence", testBumpNeverLowersAFence},
			{"CheckpointIncomplete", testEnsureCheckpointIncomplete},
			{"ConcurrentBump", testEnsureConcurrentBump},
			{"VersionBumpWaitsForOpenPush", testBumpWaitsForPush},
			{"FreshDatabaseInstallsDeclarations", testFreshInstallsDecls},
			{"SameVersionInstallsNothing", testSameVersionInstallsNothing},
		}},
	}
}

func details(t *testing.T, e *syncerr.Error) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(e.Details, &m); err != nil {
		t.Fatalf("details %s: %v", e.Details, err)
	}
	return m
}

func testEnsureIdempotent(t *testing.T, h Harness) {
	e := open(t, h)
	must(t, e.s.EnsureSchema(e.ctx, e.sc, nil))
	must(t, e.s.EnsureSchema(e.ctx, mustSchema(t, irV1), nil))
	e.commitTasks("p1", 1, []task{{id: "a", project: "p1", owner: "o1"}}, nil)
	other, err := e.reopen(mustSchema(t, irV1), nil)
	must(t, err)
	r, err := other.GetRow(e.ctx, "p1", "tasks", "a")
	must(t, err)
	if r == nil || r.Version != 1 {
		t.Fatalf("row through a second storage = %+v", r)
	}
}

func testEnsureRefusesNewer(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.reopen(mustSchema(t, irV2), nil)
	must(t, err)
	_, err = e.reopen(mustSchema(t, irV1), nil)
	wantCode(t, err, syncerr.StorageSchemaTooNew)
}

func testStoredLayoutMismatchColumn(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "p1", owner: "o1"}}, nil)
	for range 2 { // refusing writes nothing: a second attempt refuses the same way
		_, err := e.reopen(mustSchema(t, irV1TitleNullable(t)), nil)
		se := wantCode(t, err, syncerr.StorageStoredLayoutMismatch)
		d := details(t, se)
		if d["table"] != "tasks" || d["column"] != "title" {
			t.Fatalf("details = %v, want table tasks column title", d)
		}
	}
	// The database is untouched: the original schema still opens and serves.
	other, err := e.reopen(mustSchema(t, irV1), nil)
	must(t, err)
	if r, err := other.GetRow(e.ctx, "p1", "tasks", "a"); err != nil || r == nil {
		t.Fatalf("row after refusal = %v, %v", r, err)
	}
	e.commitTasks("p1", 2, []task{{id: "b", project: "p1", owner: "o1"}}, nil)
}

func testStoredLayoutMismatchTable(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.reopen(mustSchema(t, irV1NoDigest(t)), nil)
	se := wantCode(t, err, syncerr.StorageStoredLayoutMismatch)
	d := details(t, se)
	if d["table"] != "digest" {
		t.Fatalf("details = %v, want table digest", d)
	}
	if _, ok := d["column"]; ok {
		t.Fatalf("details = %v, want no column for a retired table", d)
	}
	_, err = e.reopen(mustSchema(t, irV1), nil)
	must(t, err)
}

func testEnsureBump(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "p1", owner: "o1"}, {id: "b", project: "p1", owner: "o2"}}, nil)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		return tx.UpsertRow(e.ctx, "digest", digestWrite("d1", "p1", 2))
	}))
	v2 := mustSchema(t, irV2)
	s2, err := e.reopen(v2, nil)
	must(t, err)
	// Existing rows survive with their version and scopes.
	r, err := s2.GetRow(e.ctx, "p1", "tasks", "a")
	must(t, err)
	if r == nil || r.Version != 1 || r.Scopes["project"] != "p1" || r.Scopes["owner"] != "o1" {
		t.Fatalf("migrated row = %+v", r)
	}
	// Rows and the log's changes alike are in the new layout: the
	// appended column NULL (a served schema window projects from it).
	a := task{id: "a", project: "p1", owner: "o1", title: "title of a"}
	want := encodeRow(append(tasksColumns[:6:6], schemaInteger), append(a.values(), nil))
	if !bytes.Equal(r.Payload, want) {
		t.Fatalf("migrated row payload %x, want %x", r.Payload, want)
	}
	cs, err := s2.ReadCommitWindow(e.ctx, "p1", ports.CommitWindow{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}},
		AfterSeq: 0, ThroughSeq: 10, LimitChanges: 10})
	must(t, err)
	if len(cs) != 1 || len(cs[0].Changes) != 2 || !bytes.Equal(cs[0].Changes[0].Row, want) {
		t.Fatalf("migrated log = %+v, want the change of a as %x", cs, want)
	}
	// The added nullable column and the new table are writable.
	vals := append(task{id: "c", project: "p1", owner: "o1", title: "c"}.values(), int64(5))
	w := ports.RowWrite{RowID: "c", Version: 1, Scopes: map[string]string{"project": "p1", "owner": "o1"}, Values: vals,
		Payload: encodeRow(append(tasksColumns[:6:6], schemaInteger), vals)}
	must(t, s2.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: 2}, func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "tasks", w); err != nil {
			return err
		}
		lv := []any{"l1", "p1", "urgent"}
		if err := tx.UpsertRow(e.ctx, "labels", ports.RowWrite{RowID: "l1", Version: 1, Scopes: map[string]string{"project": "p1"}, Values: lv,
			Payload: encodeRow([]schemaType{schemaString, schemaString, schemaString}, lv)}); err != nil {
			return err
		}
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 2, ActorID: "a", ClientID: "c", ClientCommitID: "v2"})
		return err
	}))
	rows, err := s2.ScanRows(e.ctx, "p1", ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, Limit: 10})
	must(t, err)
	if got := rowIDs(rows); !equalStrings(got, []string{"a", "b", "c"}) {
		t.Fatalf("tasks after bump = %v", got)
	}
	// The retired table is gone from the running schema.
	if _, err := s2.GetRow(e.ctx, "p1", "digest", "d1"); err == nil {
		t.Fatal("retired table still readable")
	}
	// A second bump-free open at v2 verifies cleanly.
	_, err = e.reopen(v2, nil)
	must(t, err)
}

func testEnsureBumpInstallsDecls(t *testing.T, h Harness) {
	e := open(t, h)
	decls := []checkpoint.Declaration{{Partition: "p1", Name: "proj", SchemaVersion: 2}}
	s2, err := e.reopen(mustSchema(t, irV2), decls)
	must(t, err)
	cps, err := s2.ReadCheckpoints(e.ctx, "p1")
	must(t, err)
	if len(cps) != 1 || cps[0].Name != "proj" || cps[0].State != checkpoint.StateDeclared || cps[0].SchemaVersion != 2 || cps[0].OwnerEpoch != 0 || cps[0].Watermark != 0 {
		t.Fatalf("checkpoints after bump = %+v", cps)
	}
	gate, err := s2.ReadServeGate(e.ctx, "p1", 2)
	must(t, err)
	if gate.StoredSchemaVersion != 2 || len(gate.Pending) != 1 || gate.Pending[0] != (checkpoint.PendingRef{Partition: "p1", Name: "proj"}) {
		t.Fatalf("gate after bump = %+v", gate)
	}
	// The fence came with the declaration: an old writer is refused.
	err = s2.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "old"})
		return err
	})
	wantCode(t, err, syncerr.StorageWriterFenceRejected)
	must(t, s2.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: 2}, func(tx ports.PushTx) error {
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "new"})
		return err
	}))
	// Partitions without a declaration have no fence.
	must(t, s2.Push(e.ctx, "p2", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "old"})
		return err
	}))
}

// testBumpFencesEveryPartition: SPEC §2.4, schema upgrade writer fence.
// The bump raises the fence of every partition the log knows to the new
// version, one fenced lower by an earlier declaration included, so a
// store still running the previous version (another process) has every
// append refused with the catalog code and stores nothing of it: no
// payload in the previous layout lands.
func testBumpFencesEveryPartition(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "p1", owner: "o1"}}, nil)
	must(t, e.appendAt("p2", v1))
	_, err := e.s.DeclareCheckpoint(e.ctx, decl("p3", "proj", v1), 1)
	must(t, err)
	must(t, e.appendAt("p3", v1)) // fenced at 1: a writer at 1 passes
	s2, err := e.reopen(mustSchema(t, irV2), nil)
	must(t, err)
	for _, p := range []string{"p1", "p2", "p3"} {
		wantCode(t, e.appendAt(p, v1), syncerr.StorageWriterFenceRejected)
		must(t, e.appendOn(s2, p, 2))
	}
	// Rows the old store writes with its append are refused with it.
	err = e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1}, func(tx ports.PushTx) error {
		_, err := e.stageTasks(tx, 2, []task{{id: "b", project: "p1", owner: "o1"}}, nil)
		return err
	})
	wantCode(t, err, syncerr.StorageWriterFenceRejected)
	if r, err := s2.GetRow(e.ctx, "p1", "tasks", "b"); err != nil || r != nil {
		t.Fatalf("row of a fenced writer = %+v, %v", r, err)
	}
	if b := e.bounds("p1"); b.MaxSeq != 2 {
		t.Fatalf("p1 bounds = %+v, want the v1 commit and the v2 one", b)
	}
}

// testBumpNeverLowersAFence: a partition fenced above the new version (a
// checkpoint declared for a later one) keeps its fence through the bump.
func testBumpNeverLowersAFence(t *testing.T, h Harness) {
	e := open(t, h)
	must(t, e.appendAt("p1", v1))
	_, err := e.s.DeclareCheckpoint(e.ctx, decl("p1", "later", 3), 1)
	must(t, err)
	s2, err := e.reopen(mustSchema(t, irV2), nil)
	must(t, err)
	wantCode(t, e.appendOn(s2, "p1", 2), syncerr.StorageWriterFenceRejected)
	must(t, e.appendOn(s2, "p1", 3))
}

func testEnsureCheckpointIncomplete(t *testing.T, h Harness) {
	e := open(t, h)
	v2 := mustSchema(t, irV2)
	decls := []checkpoint.Declaration{{Partition: "p1", Name: "proj", SchemaVersion: 2}}
	_, err := e.reopen(v2, decls)
	must(t, err)
	for _, omit := range [][]checkpoint.Declaration{nil, {}, {{Partition: "p2", Name: "proj", SchemaVersion: 2}}} {
		_, err = e.reopen(v2, omit)
		wantCode(t, err, syncerr.StorageCheckpointIncomplete)
	}
	s, err := e.reopen(v2, decls)
	must(t, err)
	// Once activated, the checkpoint needs no declaration.
	cp, err := s.ClaimCheckpoint(e.ctx, decls[0], 10)
	must(t, err)
	res, err := s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, NowMs: 11})
	must(t, err)
	if res != checkpoint.Activated {
		t.Fatalf("activation = %q", res)
	}
	_, err = e.reopen(v2, nil)
	must(t, err)
}

func testEnsureConcurrentBump(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "p1", owner: "o1"}}, nil)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		s, v2 := h.Reopen(t, e.s), mustSchema(t, irV2)
		wg.Go(func() { errs[i] = s.EnsureSchema(e.ctx, v2, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("bump %d: %v", i, err)
		}
	}
	gate, err := e.s.ReadServeGate(e.ctx, "p1", 2)
	must(t, err)
	if gate.StoredSchemaVersion != 2 {
		t.Fatalf("stored version = %d", gate.StoredSchemaVersion)
	}
}

// testBumpWaitsForPush: a schema bump that declares a checkpoint (raising
// the fence) never interleaves with an open push; once it commits, an old
// writer is refused.
func testBumpWaitsForPush(t *testing.T, h Harness) {
	e := open(t, h)
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.push("p1", func(tx ports.PushTx) error {
			if _, err := tx.GetRow(e.ctx, "tasks", "a"); err != nil {
				return err
			}
			close(holding)
			<-release
			k := task{id: "a", project: "p1", owner: "o1"}
			if err := tx.UpsertRow(e.ctx, "tasks", k.write(0)); err != nil {
				return err
			}
			_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "old", Changes: []commit.Change{k.upsert()}})
			return err
		})
	}()
	select {
	case <-holding:
	case err := <-done:
		t.Fatalf("push ended early: %v", err)
	}
	s2, v2 := h.Reopen(t, e.s), mustSchema(t, irV2)
	bumped := make(chan error, 1)
	go func() {
		bumped <- s2.EnsureSchema(e.ctx, v2, []checkpoint.Declaration{{Partition: "p1", Name: "proj", SchemaVersion: 2}})
	}()
	select {
	case err := <-bumped:
		close(release)
		<-done
		t.Fatalf("the bump completed while a push was open (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	must(t, <-done) // the open push ran entirely before the barrier
	must(t, <-bumped)
	if b := e.bounds("p1"); b.MaxSeq != 1 {
		t.Fatalf("bounds = %+v", b)
	}
	err := e.push("p1", func(tx ports.PushTx) error {
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 2, ActorID: "a", ClientID: "c", ClientCommitID: "late"})
		return err
	})
	wantCode(t, err, syncerr.StorageWriterFenceRejected)
}

func testFreshInstallsDecls(t *testing.T, h Harness) {
	ctx := t.Context()
	s := h.New(t)
	decls := []checkpoint.Declaration{{Partition: "p1", Name: "proj", SchemaVersion: 1}}
	must(t, s.EnsureSchema(ctx, mustSchema(t, irV1), decls))
	cps, err := s.ReadCheckpoints(ctx, "p1")
	must(t, err)
	if len(cps) != 1 || cps[0].State != checkpoint.StateDeclared || cps[0].SchemaVersion != 1 {
		t.Fatalf("checkpoints after the first ensure = %+v", cps)
	}
	err = s.Push(ctx, "p1", ports.PushOptions{WriterVersion: 0}, func(tx ports.PushTx) error {
		_, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "old"})
		return err
	})
	wantCode(t, err, syncerr.StorageWriterFenceRejected)
}

func testSameVersionInstallsNothing(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.reopen(mustSchema(t, irV1), []checkpoint.Declaration{{Partition: "p1", Name: "late", SchemaVersion: 1}})
	must(t, err)
	cps, err := e.s.ReadCheckpoints(e.ctx, "p1")
	must(t, err)
	if len(cps) != 0 {
		t.Fatalf("a same-version ensure installed %+v (declare late checkpoints with DeclareCheckpoint)", cps)
	}
	must(t, e.appendAt("p1", 1))
}

package contract

import (
	"fmt"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// checkpointGroups are the checkpoint case groups, in run order.
func checkpointGroups() []group {
	return []group{
		{"Checkpoints", []testCase{
			{"DeclareInstallsRowAndFence", testDeclare},
			{"ConcurrentClaimsGetEpochsOneAndTwo", testConcurrentClaims},
			{"ClaimRefusesUndeclared", testClaimUndeclared},
			{"SupersededOwnerAdvanceChangesNothing", testAdvanceSuperseded},
			{"AdvanceInsidePushCommitsWithWrites", testAdvanceInTx},
			{"ActivationNeedsFence", testActivationNeedsFence},
			{"SourceChangeAboveWatermarkIsStale", testActivationStale},
			{"PrunedWindowIsUnverifiable", testActivationUnverifiable},
			{"ActivatedIsTerminal", testActivatedTerminal},
			{"SourceCoverage", testSourceCoverage},
			{"AdvanceStoresCursor", testCheckpointCursor},
			{"TableScanIgnoresScopes", testTableScan},
		}},
		{"ServeGate", []testCase{
			{"ReadsMarkerEpochAndPending", testServeGate},
			{"OnTransaction", testServeGateTx},
		}},
	}
}

func decl(p, name string, v int32) checkpoint.Declaration {
	return checkpoint.Declaration{Partition: p, Name: name, SchemaVersion: v}
}

func (e *env) checkpoint(p, name string) checkpoint.Checkpoint {
	e.t.Helper()
	cps, err := e.s.ReadCheckpoints(e.ctx, p)
	must(e.t, err)
	for _, cp := range cps {
		if cp.Name == name {
			return cp
		}
	}
	e.t.Fatalf("checkpoint %s/%s not found in %+v", p, name, cps)
	return checkpoint.Checkpoint{}
}

// appendAt appends an empty commit at writer version v.
func (e *env) appendAt(p string, v int32) error { return e.appendOn(e.s, p, v) }

// appendOn is appendAt through s.
func (e *env) appendOn(s ports.Storage, p string, v int32) error {
	return s.Push(e.ctx, p, ports.PushOptions{WriterVersion: v}, func(tx ports.PushTx) error {
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: fmt.Sprint("v", v)})
		return err
	})
}

func testDeclare(t *testing.T, h Harness) {
	e := open(t, h)
	must(t, e.appendAt("p1", 1))
	cp, err := e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", 2), 10)
	must(t, err)
	if cp != (checkpoint.Checkpoint{Partition: "p1", Name: "proj", SchemaVersion: 2, State: checkpoint.StateDeclared, UpdatedAtMs: 10}) {
		t.Fatalf("declared = %+v", cp)
	}
	// The fence is raised at declaration: old writers are refused now.
	wantCode(t, e.appendAt("p1", 1), syncerr.StorageWriterFenceRejected)
	must(t, e.appendAt("p1", 2))
	must(t, e.appendAt("p1", 3))
	// Other partitions are not fenced.
	must(t, e.appendAt("p2", 1))
	// Re-declaring returns the stored row untouched.
	claimed, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 2), 11)
	must(t, err)
	again, err := e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", 2), 12)
	must(t, err)
	if again != claimed {
		t.Fatalf("re-declare = %+v, want %+v", again, claimed)
	}
	// A lower declaration never lowers the fence.
	_, err = e.s.DeclareCheckpoint(e.ctx, decl("p1", "older", 1), 13)
	must(t, err)
	wantCode(t, e.appendAt("p1", 1), syncerr.StorageWriterFenceRejected)
	if b := e.bounds("p1"); b.MaxSeq != 3 {
		t.Fatalf("refused appends took seqs: %+v", b)
	}
}

func testConcurrentClaims(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", 1), 1)
	must(t, err)
	var wg sync.WaitGroup
	res := make([]checkpoint.Checkpoint, 2)
	errs := make([]error, 2)
	for i := range res {
		wg.Go(func() { res[i], errs[i] = e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 1), 2) })
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	if got := res[0].OwnerEpoch + res[1].OwnerEpoch; got != 3 || res[0].OwnerEpoch == res[1].OwnerEpoch {
		t.Fatalf("claims got epochs %d and %d, want 1 and 2", res[0].OwnerEpoch, res[1].OwnerEpoch)
	}
	for _, cp := range res {
		if cp.State != checkpoint.StateBackfilling {
			t.Fatalf("claimed state = %q", cp.State)
		}
	}
	if cp := e.checkpoint("p1", "proj"); cp.OwnerEpoch != 2 || cp.State != checkpoint.StateBackfilling || cp.UpdatedAtMs != 2 {
		t.Fatalf("stored after claims = %+v", cp)
	}
}

func testClaimUndeclared(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "nope", 1), 1)
	wantCode(t, err, syncerr.StorageCheckpointNotDeclared)
}

func testAdvanceSuperseded(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", 1), 1)
	must(t, err)
	first, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 1), 2)
	must(t, err)
	ok, err := e.s.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "proj", OwnerEpoch: first.OwnerEpoch, Watermark: 4, ObservedRows: 40, NowMs: 3})
	must(t, err)
	if !ok {
		t.Fatal("owner advance refused")
	}
	second, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 1), 4)
	must(t, err)
	before := e.checkpoint("p1", "proj")
	if before.Watermark != 4 || before.ObservedRows != 40 || before.OwnerEpoch != second.OwnerEpoch {
		t.Fatalf("after advance and reclaim = %+v", before)
	}
	ok, err = e.s.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "proj", OwnerEpoch: first.OwnerEpoch, Watermark: 9, ObservedRows: 90, NowMs: 5})
	must(t, err)
	if ok {
		t.Fatal("superseded owner advanced")
	}
	if after := e.checkpoint("p1", "proj"); after != before {
		t.Fatalf("superseded advance changed the row: %+v → %+v", before, after)
	}
	ok, err = e.s.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "missing", OwnerEpoch: 1, Watermark: 9, NowMs: 5})
	if err != nil || ok {
		t.Fatalf("advance of an absent checkpoint = %v, %v", ok, err)
	}
}

func testAdvanceInTx(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", 1), 1)
	must(t, err)
	cp, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 1), 2)
	must(t, err)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		ok, err := tx.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: 6, ObservedRows: 1, NowMs: 3})
		if err != nil || !ok {
			return fmt.Errorf("advance in tx = %v, %v", ok, err)
		}
		if err := tx.UpsertRow(e.ctx, "digest", digestWrite("d1", "p1", 1)); err != nil {
			return err
		}
		_, err = tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 3, ActorID: "server", ClientID: "backfill", ClientCommitID: "b1"})
		return err
	}))
	if got := e.checkpoint("p1", "proj"); got.Watermark != 6 || got.ObservedRows != 1 || got.UpdatedAtMs != 3 {
		t.Fatalf("after tx advance = %+v", got)
	}
	// A superseded owner inside a push gets false and writes nothing.
	_, err = e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 1), 4)
	must(t, err)
	before := e.checkpoint("p1", "proj")
	must(t, e.push("p1", func(tx ports.PushTx) error {
		ok, err := tx.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: 99, NowMs: 5})
		if err != nil || ok {
			return fmt.Errorf("superseded advance in tx = %v, %v", ok, err)
		}
		return nil
	}))
	if after := e.checkpoint("p1", "proj"); after != before {
		t.Fatalf("superseded tx advance changed the row: %+v", after)
	}
}

func testActivationNeedsFence(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "absent", OwnerEpoch: 1, NowMs: 1})
	wantCode(t, err, syncerr.StorageCheckpointFenceMissing)
	// Declared at 1 (fence 1), then claimed for version 3: the fence is below it.
	_, err = e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", 1), 1)
	must(t, err)
	cp, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 3), 2)
	must(t, err)
	_, err = e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, NowMs: 3})
	wantCode(t, err, syncerr.StorageCheckpointFenceMissing)
	if got := e.checkpoint("p1", "proj"); got.State != checkpoint.StateBackfilling {
		t.Fatalf("state after refused activation = %q", got.State)
	}
	if h.Engine != nil {
		// With the fence row removed behind the storage's back, activation refuses too.
		_, err = e.s.DeclareCheckpoint(e.ctx, decl("p2", "proj", 1), 1)
		must(t, err)
		cp2, err := e.s.ClaimCheckpoint(e.ctx, decl("p2", "proj", 1), 2)
		must(t, err)
		must(t, h.Engine.Exec(e.ctx, e.s, "DELETE FROM sync_writer_fence WHERE partition = ?", "p2"))
		_, err = e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p2", Name: "proj", OwnerEpoch: cp2.OwnerEpoch, NowMs: 3})
		wantCode(t, err, syncerr.StorageCheckpointFenceMissing)
	}
}

// claimed declares and claims p1/proj at version 1 after a tasks commit,
// returning the claim and the source coverage watermark.
func claimed(e *env) (checkpoint.Checkpoint, int64) {
	e.t.Helper()
	e.commitTasks("p1", 1, []task{{id: "a", project: "p1", owner: "o1"}}, nil)
	_, err := e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", 1), 1)
	must(e.t, err)
	cp, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 1), 2)
	must(e.t, err)
	wm, err := e.s.SourceCoverageSeq(e.ctx, "p1", []string{"tasks"})
	must(e.t, err)
	return cp, wm
}

func testActivationStale(t *testing.T, h Harness) {
	e := open(t, h)
	cp, wm := claimed(e)
	if wm != 1 {
		t.Fatalf("coverage = %d", wm)
	}
	// A write to a non-source table does not invalidate the watermark.
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "digest", digestWrite("d", "p1", 1)); err != nil {
			return err
		}
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 2, ActorID: "s", ClientID: "b", ClientCommitID: "d",
			Changes: []commit.Change{{Table: "digest", RowID: "d", Op: commit.OpUpsert, RowVersion: 1, Scopes: map[string]string{"project": "p1"}, Row: digestWrite("d", "p1", 1).Payload}}})
		return err
	}))
	state, err := e.s.HasSourceChangesAbove(e.ctx, "p1", []string{"tasks"}, wm)
	must(t, err)
	if state != checkpoint.SourceClean {
		t.Fatalf("sources after a projection write = %q", state)
	}
	// A source change above the watermark makes activation stale.
	e.commitTasks("p1", 3, []task{{id: "b", project: "p1", owner: "o1"}}, nil)
	state, err = e.s.HasSourceChangesAbove(e.ctx, "p1", []string{"notes", "tasks"}, wm)
	must(t, err)
	if state != checkpoint.SourceChanged {
		t.Fatalf("sources after a source write = %q", state)
	}
	res, err := e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: wm, Sources: []string{"tasks"}, NowMs: 5})
	must(t, err)
	if res != checkpoint.Stale {
		t.Fatalf("activation = %q, want stale", res)
	}
	if got := e.checkpoint("p1", "proj"); got.State != checkpoint.StateBackfilling {
		t.Fatalf("state after stale activation = %q", got.State)
	}
	// Caught up, it activates.
	wm2, err := e.s.SourceCoverageSeq(e.ctx, "p1", []string{"tasks"})
	must(t, err)
	res, err = e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: wm2, Sources: []string{"tasks"}, NowMs: 6})
	must(t, err)
	if res != checkpoint.Activated {
		t.Fatalf("activation after catching up = %q", res)
	}
	if got := e.checkpoint("p1", "proj"); got.State != checkpoint.StateActivated || got.Watermark != wm2 || got.UpdatedAtMs != 6 {
		t.Fatalf("activated row = %+v", got)
	}
}

func testActivationUnverifiable(t *testing.T, h Harness) {
	e := open(t, h)
	epoch, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	cp, _ := claimed(e)
	e.commitTasks("p1", 2, []task{{id: "b", project: "p1", owner: "o1"}}, nil)
	e.commitTasks("p1", 3, []task{{id: "c", project: "p1", owner: "o1"}}, nil)
	_, err = e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: 3})
	must(t, err)
	state, err := e.s.HasSourceChangesAbove(e.ctx, "p1", []string{"tasks"}, 2)
	must(t, err)
	if state != checkpoint.SourceUnverifiable {
		t.Fatalf("sources over a pruned window = %q", state)
	}
	res, err := e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: 2, Sources: []string{"tasks"}, NowMs: 5})
	must(t, err)
	if res != checkpoint.Unverifiable {
		t.Fatalf("activation = %q, want unverifiable", res)
	}
	if got := e.checkpoint("p1", "proj"); got.State != checkpoint.StateBackfilling {
		t.Fatalf("state after unverifiable activation = %q", got.State)
	}
	// At the horizon the window is verifiable again.
	res, err = e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: 3, Sources: []string{"tasks"}, NowMs: 6})
	must(t, err)
	if res != checkpoint.Activated {
		t.Fatalf("activation at the horizon = %q", res)
	}
}

func testActivatedTerminal(t *testing.T, h Harness) {
	e := open(t, h)
	cp, wm := claimed(e)
	// A superseded owner cannot activate.
	res, err := e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch - 1, Watermark: wm, Sources: []string{"tasks"}, NowMs: 3})
	must(t, err)
	if res != checkpoint.Stale {
		t.Fatalf("superseded activation = %q", res)
	}
	res, err = e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: wm, Sources: []string{"tasks"}, NowMs: 4})
	must(t, err)
	if res != checkpoint.Activated {
		t.Fatalf("activation = %q", res)
	}
	activated := e.checkpoint("p1", "proj")
	res, err = e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: wm, Sources: []string{"tasks"}, NowMs: 5})
	must(t, err)
	if res != checkpoint.Stale {
		t.Fatalf("re-activation = %q, want stale", res)
	}
	_, err = e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 1), 6)
	wantCode(t, err, syncerr.StorageCheckpointNotDeclared)
	again, err := e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", 1), 7)
	must(t, err)
	if again != activated {
		t.Fatalf("re-declare of an activated checkpoint = %+v", again)
	}
	if got := e.checkpoint("p1", "proj"); got != activated {
		t.Fatalf("activated row changed: %+v → %+v", activated, got)
	}
}

func testSourceCoverage(t *testing.T, h Harness) {
	e := open(t, h)
	for _, tables := range [][]string{nil, {"tasks"}} {
		if got, err := e.s.SourceCoverageSeq(e.ctx, "p1", tables); err != nil || got != 0 {
			t.Fatalf("coverage of an empty log = %d, %v", got, err)
		}
	}
	logFixture(e)
	for _, tt := range []struct {
		tables []string
		want   int64
	}{{[]string{"tasks"}, 6}, {[]string{"notes"}, 3}, {[]string{"notes", "digest"}, 3}, {[]string{"digest"}, 0}, {nil, 0}} {
		got, err := e.s.SourceCoverageSeq(e.ctx, "p1", tt.tables)
		must(t, err)
		if got != tt.want {
			t.Errorf("coverage(%v) = %d, want %d", tt.tables, got, tt.want)
		}
	}
	for _, tt := range []struct {
		tables []string
		seq    int64
		want   checkpoint.SourceState
	}{{[]string{"notes"}, 3, checkpoint.SourceClean}, {[]string{"notes"}, 2, checkpoint.SourceChanged}, {nil, 0, checkpoint.SourceClean}, {[]string{"tasks"}, 6, checkpoint.SourceClean}} {
		got, err := e.s.HasSourceChangesAbove(e.ctx, "p1", tt.tables, tt.seq)
		must(t, err)
		if got != tt.want {
			t.Errorf("HasSourceChangesAbove(%v, %d) = %q, want %q", tt.tables, tt.seq, got, tt.want)
		}
	}
}

func testServeGate(t *testing.T, h Harness) {
	e := open(t, h)
	g, err := e.s.ReadServeGate(e.ctx, "p1", 1)
	must(t, err)
	if g.StoredSchemaVersion != 1 || g.LogEpoch != "" || len(g.Pending) != 0 {
		t.Fatalf("fresh gate = %+v", g)
	}
	ep, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	for _, d := range []checkpoint.Declaration{decl("p2", "b", 2), decl("p1", "z", 2), decl("p1", "a", 2), decl("p3", "c", 3)} {
		_, err := e.s.DeclareCheckpoint(e.ctx, d, 1)
		must(t, err)
	}
	g, err = e.s.ReadServeGate(e.ctx, "p1", 2)
	must(t, err)
	want := []checkpoint.PendingRef{{Partition: "p1", Name: "a"}, {Partition: "p1", Name: "z"}, {Partition: "p2", Name: "b"}}
	if g.StoredSchemaVersion != 1 || g.LogEpoch != ep || fmt.Sprint(g.Pending) != fmt.Sprint(want) {
		t.Fatalf("gate = %+v, want pending %v", g, want)
	}
	// Activation removes a checkpoint from the gate.
	cp, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "a", 2), 2)
	must(t, err)
	res, err := e.s.ActivateCheckpoint(e.ctx, ports.CheckpointActivation{Partition: "p1", Name: "a", OwnerEpoch: cp.OwnerEpoch, NowMs: 3})
	must(t, err)
	if res != checkpoint.Activated {
		t.Fatalf("activation = %q", res)
	}
	g, err = e.s.ReadServeGate(e.ctx, "p2", 2)
	must(t, err)
	if fmt.Sprint(g.Pending) != fmt.Sprint(want[1:]) || g.LogEpoch != "" {
		t.Fatalf("gate after activation = %+v", g)
	}
	// A rotation shows in the token.
	rot, err := e.s.RotateLogEpoch(e.ctx, "p1")
	must(t, err)
	g2, err := e.s.ReadServeGate(e.ctx, "p1", 2)
	must(t, err)
	if g2.LogEpoch != rot {
		t.Fatalf("gate epoch after rotation = %q", g2.LogEpoch)
	}
}

func testServeGateTx(t *testing.T, h Harness) {
	e := open(t, h)
	ep, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	_, err = e.s.DeclareCheckpoint(e.ctx, decl("p2", "proj", 1), 1)
	must(t, err)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		g, err := tx.ReadServeGate(e.ctx)
		if err != nil {
			return err
		}
		if g.StoredSchemaVersion != 1 || g.LogEpoch != ep || len(g.Pending) != 1 || g.Pending[0] != (checkpoint.PendingRef{Partition: "p2", Name: "proj"}) {
			return fmt.Errorf("transaction gate = %+v", g)
		}
		return nil
	}))
	// A newer database shows in the transaction's gate of an old process.
	_, err = e.reopen(mustSchema(t, irV2), nil)
	must(t, err)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		g, err := tx.ReadServeGate(e.ctx)
		if err != nil {
			return err
		}
		if r := checkpoint.GateRefusal(g, v1, nil); r == nil || r.Kind != checkpoint.RefuseSchema || g.StoredSchemaVersion != 2 {
			return fmt.Errorf("gate after a bump = %+v, refusal %+v", g, r)
		}
		return nil
	}))
}

// testCheckpointCursor: an advance stores the backfill's resume cursor with
// the watermark (outside and inside a push), a reclaim keeps it, and a
// superseded owner's cursor is never stored.
func testCheckpointCursor(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", 1), 1)
	must(t, err)
	if cp := e.checkpoint("p1", "proj"); cp.Cursor != "" {
		t.Fatalf("declared cursor = %q", cp.Cursor)
	}
	first, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 1), 2)
	must(t, err)
	ok, err := e.s.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "proj", OwnerEpoch: first.OwnerEpoch, Watermark: 2, ObservedRows: 5, Cursor: "scan:row-05", NowMs: 3})
	if err != nil || !ok {
		t.Fatalf("advance = %v, %v", ok, err)
	}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		ok, err := tx.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "proj", OwnerEpoch: first.OwnerEpoch, Watermark: 2, ObservedRows: 9, Cursor: "scan:row-09", NowMs: 4})
		if err != nil || !ok {
			return fmt.Errorf("advance in tx = %v, %v", ok, err)
		}
		return nil
	}))
	second, err := e.s.ClaimCheckpoint(e.ctx, decl("p1", "proj", 1), 5)
	must(t, err)
	if second.Cursor != "scan:row-09" || second.ObservedRows != 9 {
		t.Fatalf("reclaimed = %+v, want the stored cursor", second)
	}
	ok, err = e.s.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "proj", OwnerEpoch: first.OwnerEpoch, Watermark: 7, Cursor: "scan:stale", NowMs: 6})
	if err != nil || ok {
		t.Fatalf("superseded advance = %v, %v", ok, err)
	}
	if cp := e.checkpoint("p1", "proj"); cp.Cursor != "scan:row-09" {
		t.Fatalf("cursor after a superseded advance = %q", cp.Cursor)
	}
}

// testTableScan: ScanTable pages every current row of a table by row id,
// across scope values, and refuses a limit below one.
func testTableScan(t *testing.T, h Harness) {
	e := open(t, h)
	ts, ok := e.s.(ports.TableScanner)
	if !ok {
		t.Skip("storage has no table scanner")
	}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		for i, id := range []string{"d3", "d1", "d2", "d4"} {
			if err := tx.UpsertRow(e.ctx, "digest", digestWrite(id, fmt.Sprint("proj-", i%2), int64(i))); err != nil {
				return err
			}
		}
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "rows"})
		return err
	}))
	var got []string
	after := ""
	for {
		page, err := ts.ScanTable(e.ctx, "p1", ports.TableScan{Table: "digest", AfterRowID: after, Limit: 3})
		must(t, err)
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			got = append(got, r.RowID+"/"+r.Scopes["project"])
		}
		after = page[len(page)-1].RowID
	}
	if want := "d1/proj-1 d2/proj-0 d3/proj-0 d4/proj-1"; fmt.Sprint(got) != "["+want+"]" {
		t.Fatalf("scanned %v, want [%s]", got, want)
	}
	if rows, err := ts.ScanTable(e.ctx, "p2", ports.TableScan{Table: "digest", Limit: 3}); err != nil || len(rows) != 0 {
		t.Fatalf("other partition = %v, %v", rows, err)
	}
	_, err := ts.ScanTable(e.ctx, "p1", ports.TableScan{Table: "digest", Limit: 0})
	wantCode(t, err, syncerr.StorageInvalidLimit)
}

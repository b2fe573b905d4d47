package contract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// pushGroups are the push case groups, in run order.
func pushGroups() []group {
	return []group{
		{"Push", []testCase{
			{"DenseSeqs", testDenseSeqs},
			{"ConcurrentPushesOnePartitionAreDense", testConcurrentDense},
			{"ConcurrentFailingPushesRollBackAlone", testConcurrentFailing},
			{"PartitionsDoNotSerialize", testPartitionsIndependent},
			{"RollbackLeavesNothing", testRollbackLeavesNothing},
			{"DiscardWritesKeepsLockAndPersistsRejection", testDiscardWrites},
			{"ReadYourOwnWritesIsolatedUntilCommit", testReadYourWrites},
			{"CommitFieldsRoundTrip", testCommitFields},
			{"IdempotencyFirstWriterWins", testIdempotencyFirstWriter},
			{"RacingDuplicateResultKeepsFirst", testRacingDuplicate},
			{"ConstraintViolationIsTyped", testConstraintTyped},
			{"ConstraintViolationThenRejection", testConstraintThenReject},
			{"Tombstones", testTombstones},
			{"BlobRefs", testBlobRefs},
			{"BlobClaims", testBlobClaims},
			{"BlobClaimsRacePushes", testBlobClaimsRace},
			{"Reactions", testReactions},
			{"Lookup", testLookup},
			{"ColumnVersionsStoredVerbatim", testColumnVersions},
			{"CancelledContextIsAllOrNothing", testCancelAllOrNothing},
			{"WaitingPushHonoursContext", testWaitHonoursContext},
			{"FirstRowHintNeverStale", testFirstRowHint},
		}},
	}
}

func testDenseSeqs(t *testing.T, h Harness) {
	e := open(t, h)
	for i := range 5 {
		seq := e.commitTasks("p1", int64(i), []task{{id: fmt.Sprint("r", i), project: "p1", owner: "o"}}, nil)
		if seq != int64(i+1) {
			t.Fatalf("commit %d got seq %d", i, seq)
		}
	}
	// Seqs are per partition.
	if seq := e.commitTasks("p2", 1, []task{{id: "x", project: "p1", owner: "o"}}, nil); seq != 1 {
		t.Fatalf("first seq of p2 = %d", seq)
	}
	if b := e.bounds("p1"); b.MaxSeq != 5 || b.HorizonSeq != 0 {
		t.Fatalf("bounds = %+v", b)
	}
	if b := e.bounds("unknown"); b != (ports.LogBounds{}) {
		t.Fatalf("bounds of an unknown partition = %+v", b)
	}
}

func testConcurrentDense(t *testing.T, h Harness) {
	e := open(t, h)
	const workers, each = 6, 8
	seqs, errs := raceTaskPushes(e, workers, each, nil)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seqs not dense: %v", seqs)
		}
	}
	cs := e.window("p1", map[string][]string{"project": {"p1"}}, 0, workers*each, 1000)
	if len(cs) != workers*each {
		t.Fatalf("window holds %d commits, want %d", len(cs), workers*each)
	}
	for i, c := range cs {
		if c.Seq != int64(i+1) || len(c.Changes) != 1 {
			t.Fatalf("commit %d = seq %d with %d changes", i, c.Seq, len(c.Changes))
		}
	}
}

// testConcurrentFailing: of many pushes racing for one partition (on a
// group-committing engine, sharing transactions), every third fails after
// writing: each failing push gets its own error and leaves no row, result
// or seq; the others commit densely.
func testConcurrentFailing(t *testing.T, h Harness) {
	e := open(t, h)
	const workers, each = 6, 9
	refused := errors.New("refused by the push function")
	seqs, errs := raceTaskPushes(e, workers, each, func(tx ports.PushTx, w, i int, id string) error {
		if _, err := tx.PutPushResult(e.ctx, fmt.Sprint("c", w), id, []byte(`{"status":"applied"}`)); err != nil {
			return err
		}
		if i%3 == 0 {
			return refused
		}
		return nil
	})
	for k, err := range errs {
		w, i := k/each, k%each
		if i%3 == 0 && !errors.Is(err, refused) {
			t.Errorf("w%d-%d: %v, want its own error", w, i, err)
		} else if i%3 != 0 && err != nil {
			t.Errorf("w%d-%d: %v", w, i, err)
		}
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seqs not dense: %v", seqs)
		}
	}
	if b := e.bounds("p1"); b.MaxSeq != int64(len(seqs)) {
		t.Fatalf("max seq %d for %d successful pushes", b.MaxSeq, len(seqs))
	}
	for w := range workers {
		for i := range each {
			id := fmt.Sprintf("w%d-%d", w, i)
			row, err := e.s.GetRow(e.ctx, "p1", "tasks", id)
			must(t, err)
			_, stored, err := e.s.GetPushResult(e.ctx, "p1", fmt.Sprint("c", w), id)
			must(t, err)
			if want := i%3 != 0; (row != nil) != want || stored != want {
				t.Errorf("%s: row %v, result %v, want %v", id, row != nil, stored, want)
			}
		}
	}
}

// raceTaskPushes runs workers goroutines of each pushes to p1, push i of
// worker w writing task w<w>-<i> and its commit as client c<w>, then then
// (which may fail it). It returns the seqs of the pushes that committed
// and every push's error, indexed w*each+i.
func raceTaskPushes(e *env, workers, each int, then func(tx ports.PushTx, w, i int, id string) error) ([]int64, []error) {
	var mu sync.Mutex
	var seqs []int64
	errs := make([]error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				errs[w*each+i] = e.push("p1", func(tx ports.PushTx) error {
					k := task{id: id, project: "p1", owner: "o"}
					if err := tx.UpsertRow(e.ctx, "tasks", k.write(0)); err != nil {
						return err
					}
					seq, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: fmt.Sprint("c", w), ClientCommitID: id, Changes: []commit.Change{k.upsert()}})
					if err != nil {
						return err
					}
					if then != nil {
						if err := then(tx, w, i, id); err != nil {
							return err
						}
					}
					mu.Lock()
					seqs = append(seqs, seq)
					mu.Unlock()
					return nil
				})
			}
		})
	}
	wg.Wait()
	return seqs, errs
}

func testPartitionsIndependent(t *testing.T, h Harness) {
	if h.SharedWriter {
		t.Skip("the engine has one writer for all partitions")
	}
	e := open(t, h)
	release, done := holdPush(t, e, "pa")
	other := make(chan error, 1)
	go func() {
		other <- e.push("pb", func(tx ports.PushTx) error {
			_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "free"})
			return err
		})
	}()
	select {
	case err := <-other:
		must(t, err)
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("a push to another partition waited for an open push")
	}
	close(release)
	must(t, <-done)
}

// holdPush opens a push to partition that appends commit "held" and then
// waits; it returns once that push holds the partition. Closing release
// lets the push commit, and done then yields its result.
func holdPush(t *testing.T, e *env, partition string) (release chan struct{}, done chan error) {
	t.Helper()
	holding := make(chan struct{})
	release, done = make(chan struct{}), make(chan error, 1)
	go func() {
		done <- e.push(partition, func(tx ports.PushTx) error {
			if _, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "held"}); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	select {
	case <-holding:
	case err := <-done:
		t.Fatalf("holder ended early: %v", err)
	}
	return release, done
}

func testRollbackLeavesNothing(t *testing.T, h Harness) {
	e := open(t, h)
	must(t, e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1}, func(tx ports.PushTx) error { return nil }))
	_, err := e.s.DeclareCheckpoint(e.ctx, checkpoint.Declaration{Partition: "p1", Name: "proj", SchemaVersion: 1}, 1)
	must(t, err)
	cp, err := e.s.ClaimCheckpoint(e.ctx, checkpoint.Declaration{Partition: "p1", Name: "proj", SchemaVersion: 1}, 2)
	must(t, err)
	boom := errors.New("boom")
	k := task{id: "a", project: "p1", owner: "o1"}
	err = e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "tasks", k.write(0)); err != nil {
			return err
		}
		if err := tx.SetBlobRefs(e.ctx, "tasks", "a", []string{"blob1"}); err != nil {
			return err
		}
		if err := tx.UpsertRow(e.ctx, "notes", noteWrite(7, "p1")); err != nil {
			return err
		}
		seq, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 5, ActorID: "a", ClientID: "c", ClientCommitID: "cc", Changes: []commit.Change{k.upsert(), {Table: "tasks", RowID: "gone", Op: commit.OpDelete, Scopes: k.scopes()}}})
		if err != nil {
			return err
		}
		if err := tx.EnqueueReactions(e.ctx, ports.ReactionSource{ClientID: "c", ClientCommitID: "cc", CommitSeq: seq, CreatedAtMs: 5},
			[]ports.Reaction{{IdempotencyKey: "rk", Type: "t", Version: 1, Payload: []byte(`{}`), MaxAttempts: 3}}); err != nil {
			return err
		}
		if _, err := tx.PutPushResult(e.ctx, "c", "cc", []byte(`{"status":"applied"}`)); err != nil {
			return err
		}
		if ok, err := tx.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: 9, ObservedRows: 9, NowMs: 3}); err != nil || !ok {
			return fmt.Errorf("advance in tx: %v %v", ok, err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Push returned %v, want fn's error", err)
	}
	assertPristine(t, e, cp)
	// The next commit still gets seq 1: no gap.
	if seq := e.commitTasks("p1", 6, []task{k}, nil); seq != 1 {
		t.Fatalf("seq after rollback = %d", seq)
	}
}

// assertPristine checks that nothing of the rolled-back push is visible.
func assertPristine(t *testing.T, e *env, cp checkpoint.Checkpoint) {
	t.Helper()
	if r, err := e.s.GetRow(e.ctx, "p1", "tasks", "a"); err != nil || r != nil {
		t.Fatalf("row after rollback = %+v, %v", r, err)
	}
	if r, err := e.s.GetRow(e.ctx, "p1", "notes", "7"); err != nil || r != nil {
		t.Fatalf("note after rollback = %+v, %v", r, err)
	}
	rows, err := e.s.ScanRows(e.ctx, "p1", ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, Limit: 10})
	if err != nil || len(rows) != 0 {
		t.Fatalf("row-scope index after rollback = %v, %v", rowIDs(rows), err)
	}
	if cs := e.window("p1", map[string][]string{"project": {"p1"}}, 0, 100, 100); len(cs) != 0 {
		t.Fatalf("changes after rollback = %v", changeIDs(cs))
	}
	if b := e.bounds("p1"); b.MaxSeq != 0 {
		t.Fatalf("max seq after rollback = %d", b.MaxSeq)
	}
	if refs, err := e.s.ListRowsReferencingBlob(e.ctx, "p1", "blob1"); err != nil || len(refs) != 0 {
		t.Fatalf("blob refs after rollback = %v, %v", refs, err)
	}
	if ids, err := e.s.ListReferencedBlobIDs(e.ctx, "p1"); err != nil || len(ids) != 0 {
		t.Fatalf("blob ids after rollback = %v, %v", ids, err)
	}
	if r, err := e.s.GetReaction(e.ctx, "p1", "rk"); err != nil || r != nil {
		t.Fatalf("reaction after rollback = %+v, %v", r, err)
	}
	if _, ok, err := e.s.GetPushResult(e.ctx, "p1", "c", "cc"); err != nil || ok {
		t.Fatalf("push result after rollback: %v, %v", ok, err)
	}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if _, ok, err := tx.TombstoneSeq(e.ctx, "tasks", "gone"); err != nil || ok {
			return fmt.Errorf("tombstone after rollback: %v %v", ok, err)
		}
		return nil
	}))
	cps, err := e.s.ReadCheckpoints(e.ctx, "p1")
	must(t, err)
	if len(cps) != 1 || cps[0].Watermark != cp.Watermark || cps[0].ObservedRows != cp.ObservedRows {
		t.Fatalf("checkpoint after rollback = %+v, want %+v", cps, cp)
	}
}

func testDiscardWrites(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.DeclareCheckpoint(e.ctx, checkpoint.Declaration{Partition: "p1", Name: "proj", SchemaVersion: 1}, 1)
	must(t, err)
	cp, err := e.s.ClaimCheckpoint(e.ctx, checkpoint.Declaration{Partition: "p1", Name: "proj", SchemaVersion: 1}, 2)
	must(t, err)
	k := task{id: "a", project: "p1", owner: "o1"}
	rejection := []byte(`{"status":"rejected"}`)
	var stored []byte
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "tasks", k.write(0)); err != nil {
			return err
		}
		if err := tx.SetBlobRefs(e.ctx, "tasks", "a", []string{"blob1"}); err != nil {
			return err
		}
		if _, err := tx.AdvanceCheckpoint(e.ctx, ports.CheckpointAdvance{Partition: "p1", Name: "proj", OwnerEpoch: cp.OwnerEpoch, Watermark: 9, NowMs: 3}); err != nil {
			return err
		}
		if _, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 5, ActorID: "a", ClientID: "c", ClientCommitID: "cc", Changes: []commit.Change{k.upsert()}}); err != nil {
			return err
		}
		if err := tx.DiscardWrites(e.ctx); err != nil {
			return err
		}
		if r, err := tx.GetRow(e.ctx, "tasks", "a"); err != nil || r != nil {
			return fmt.Errorf("row visible after DiscardWrites: %+v %v", r, err)
		}
		var err error
		stored, err = tx.PutPushResult(e.ctx, "c", "cc", rejection)
		return err
	}))
	if !bytes.Equal(stored, rejection) {
		t.Fatalf("stored result = %s", stored)
	}
	got, ok, err := e.s.GetPushResult(e.ctx, "p1", "c", "cc")
	must(t, err)
	if !ok || !bytes.Equal(got.Result, rejection) {
		t.Fatalf("persisted rejection = %s, %v", got.Result, ok)
	}
	if r, err := e.s.GetRow(e.ctx, "p1", "tasks", "a"); err != nil || r != nil {
		t.Fatalf("row persisted despite DiscardWrites: %+v %v", r, err)
	}
	if b := e.bounds("p1"); b.MaxSeq != 0 {
		t.Fatalf("commit persisted despite DiscardWrites: %+v", b)
	}
	if ids, err := e.s.ListReferencedBlobIDs(e.ctx, "p1"); err != nil || len(ids) != 0 {
		t.Fatalf("blob refs persisted despite DiscardWrites: %v %v", ids, err)
	}
	cps, err := e.s.ReadCheckpoints(e.ctx, "p1")
	must(t, err)
	if cps[0].Watermark != 0 {
		t.Fatalf("checkpoint advance persisted despite DiscardWrites: %+v", cps[0])
	}
}

func testReadYourWrites(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "old", project: "p1", owner: "o1", title: "old"}}, nil)
	inside, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	k := task{id: "new", project: "p1", owner: "o1", title: "new"}
	go func() {
		done <- e.push("p1", func(tx ports.PushTx) error {
			if err := tx.UpsertRow(e.ctx, "tasks", k.write(0)); err != nil {
				return err
			}
			if err := tx.DeleteRow(e.ctx, "tasks", "old", 1); err != nil {
				return err
			}
			if r, err := tx.GetRow(e.ctx, "tasks", "new"); err != nil || r == nil {
				return fmt.Errorf("staged row not visible in its transaction: %v", err)
			}
			if r, err := tx.GetRow(e.ctx, "tasks", "old"); err != nil || r != nil {
				return fmt.Errorf("staged delete not visible in its transaction: %v", err)
			}
			rows, err := tx.ScanRows(e.ctx, ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, Limit: 10})
			if err != nil || !equalStrings(rowIDs(rows), []string{"new"}) {
				return fmt.Errorf("transaction scan = %v, %v", rowIDs(rows), err)
			}
			found, err := tx.Lookup(e.ctx, ports.RowLookup{Table: "tasks", Equals: map[string]any{"title": "new"}, Limit: 5})
			if err != nil || !equalStrings(rowIDs(found), []string{"new"}) {
				return fmt.Errorf("transaction lookup = %v, %v", rowIDs(found), err)
			}
			if _, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 2, ActorID: "a", ClientID: "c", ClientCommitID: "x", Changes: []commit.Change{k.upsert()}}); err != nil {
				return err
			}
			close(inside)
			<-resume
			return nil
		})
	}()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("push ended early: %v", err)
	}
	// Outside the transaction nothing staged is visible yet.
	r, err := e.s.GetRow(e.ctx, "p1", "tasks", "new")
	if err != nil || r != nil {
		close(resume)
		t.Fatalf("uncommitted row visible outside: %+v %v", r, err)
	}
	if r, err := e.s.GetRow(e.ctx, "p1", "tasks", "old"); err != nil || r == nil {
		close(resume)
		t.Fatalf("uncommitted delete visible outside: %v", err)
	}
	if b := e.bounds("p1"); b.MaxSeq != 1 {
		close(resume)
		t.Fatalf("uncommitted seq visible outside: %+v", b)
	}
	close(resume)
	must(t, <-done)
	if r, err := e.s.GetRow(e.ctx, "p1", "tasks", "new"); err != nil || r == nil {
		t.Fatalf("committed row = %v", err)
	}
}

func testCommitFields(t *testing.T, h Harness) {
	e := open(t, h)
	up := task{id: "a", project: "p1", owner: "o1", version: 3}
	del := task{id: "b", project: "p1", owner: "o2"}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1234, ActorID: "actor-1", ClientID: "client-1", ClientCommitID: "commit-1",
			Changes: []commit.Change{up.upsert(), del.deletion(), noteUpsert(9, "p1")}})
		return err
	}))
	cs := e.window("p1", map[string][]string{"project": {"p1"}}, 0, 1, 10)
	if len(cs) != 1 {
		t.Fatalf("window = %v", changeIDs(cs))
	}
	c := cs[0]
	// A window carries what a COMMIT frame does; the whole commit, client
	// ids included, comes from the range read.
	if c.Seq != 1 || c.CreatedAtMs != 1234 || c.ActorID != "actor-1" || c.ClientID != "" || c.ClientCommitID != "" {
		t.Fatalf("window commit metadata = %+v", c)
	}
	span, err := e.s.ReadCommitRange(e.ctx, "p1", ports.CommitRange{ThroughSeq: 1, LimitChanges: 10})
	must(t, err)
	if len(span.Commits) != 1 {
		t.Fatalf("range = %+v", span)
	}
	if r := span.Commits[0]; r.Seq != 1 || r.CreatedAtMs != 1234 || r.ActorID != "actor-1" || r.ClientID != "client-1" || r.ClientCommitID != "commit-1" {
		t.Fatalf("range commit metadata = %+v", r)
	}
	if len(c.Changes) != 2 {
		t.Fatalf("tasks changes = %d, want 2 (notes change filtered out)", len(c.Changes))
	}
	u, d := c.Changes[0], c.Changes[1]
	if u.Table != "tasks" || u.RowID != "a" || u.Op != commit.OpUpsert || u.RowVersion != 3 || !bytes.Equal(u.Row, up.upsert().Row) || u.Scopes["project"] != "p1" || u.Scopes["owner"] != "o1" || len(u.Scopes) != 2 {
		t.Fatalf("upsert change = %+v", u)
	}
	if d.RowID != "b" || d.Op != commit.OpDelete || d.Row != nil || d.RowVersion != 0 || d.Scopes["owner"] != "o2" {
		t.Fatalf("delete change = %+v", d)
	}
	ns, err := e.s.ReadCommitWindow(e.ctx, "p1", ports.CommitWindow{Table: "notes", ScopeFilter: map[string][]string{"project": {"p1"}}, ThroughSeq: 1, LimitChanges: 10})
	must(t, err)
	if len(ns) != 1 || len(ns[0].Changes) != 1 || ns[0].Changes[0].RowID != "9" {
		t.Fatalf("notes window = %v", changeIDs(ns))
	}
}

func testIdempotencyFirstWriter(t *testing.T, h Harness) {
	e := open(t, h)
	first, second := []byte(`{"n":1}`), []byte(`{"n":2}`)
	for i, res := range [][]byte{first, second} {
		var got []byte
		must(t, e.push("p1", func(tx ports.PushTx) error {
			var err error
			got, err = tx.PutPushResult(e.ctx, "c", "cc", res)
			return err
		}))
		if !bytes.Equal(got, first) {
			t.Fatalf("write %d returned %s, want the first result", i, got)
		}
	}
	got, ok, err := e.s.GetPushResult(e.ctx, "p1", "c", "cc")
	must(t, err)
	if !ok || !bytes.Equal(got.Result, first) {
		t.Fatalf("stored result = %s, %v", got.Result, ok)
	}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		got, ok, err := tx.GetPushResult(e.ctx, "c", "cc")
		if err != nil || !ok || !bytes.Equal(got.Result, first) {
			return fmt.Errorf("locked re-check = %s, %v, %v", got.Result, ok, err)
		}
		return nil
	}))
	// Keys are per (partition, client, commit id).
	for _, k := range [][3]string{{"p2", "c", "cc"}, {"p1", "c2", "cc"}, {"p1", "c", "cc2"}} {
		if _, ok, err := e.s.GetPushResult(e.ctx, k[0], k[1], k[2]); err != nil || ok {
			t.Fatalf("result found under %v", k)
		}
	}
}

func testRacingDuplicate(t *testing.T, h Harness) {
	e := open(t, h)
	const n = 6
	got := make([][]byte, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = e.push("p1", func(tx ports.PushTx) error {
				var err error
				got[i], err = tx.PutPushResult(e.ctx, "c", "dup", fmt.Appendf(nil, `{"writer":%d}`, i))
				return err
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	stored, ok, err := e.s.GetPushResult(e.ctx, "p1", "c", "dup")
	must(t, err)
	if !ok {
		t.Fatal("no result stored")
	}
	for i := range n {
		if !bytes.Equal(got[i], stored.Result) {
			t.Fatalf("writer %d saw %s, stored %s", i, got[i], stored.Result)
		}
	}
}

func testConstraintTyped(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "p1", owner: "o1", title: "same"}}, nil)
	tests := []struct {
		name string
		row  task
		kind string
	}{
		{"unique", task{id: "b", project: "p1", owner: "o1", title: "same"}, "unique"},
		{"not_null", task{id: "c", project: "p1", owner: "o1", title: "\x00null"}, "not_null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.push("p1", func(tx ports.PushTx) error {
				return tx.UpsertRow(e.ctx, "tasks", tt.row.write(3))
			})
			var ce *ports.ConstraintError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *ports.ConstraintError", err)
			}
			if ce.OpIndex != 3 || ce.Table != "tasks" || ce.Kind != tt.kind {
				t.Fatalf("constraint error = %+v", ce)
			}
			if r, err := e.s.GetRow(e.ctx, "p1", "tasks", tt.row.id); err != nil || r != nil {
				t.Fatalf("violating row persisted: %+v %v", r, err)
			}
		})
	}
	// The same title in another partition is no violation.
	e.commitTasks("p2", 1, []task{{id: "b", project: "p1", owner: "o1", title: "same"}}, nil)
	// Rewriting a row with its own unique value is no violation.
	e.commitTasks("p1", 2, []task{{id: "a", project: "p1", owner: "o1", title: "same", version: 2}}, nil)
}

func testConstraintThenReject(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "p1", owner: "o1", title: "same"}}, nil)
	rejection := []byte(`{"status":"rejected","code":"sync.constraint_violation"}`)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "tasks", task{id: "ok", project: "p1", owner: "o1", title: "fine"}.write(0)); err != nil {
			return err
		}
		err := tx.UpsertRow(e.ctx, "tasks", task{id: "b", project: "p1", owner: "o1", title: "same"}.write(1))
		if err == nil {
			// A pipelining store reports the write's failure with the
			// next read.
			_, err = tx.GetRow(e.ctx, "tasks", "ok")
		}
		var ce *ports.ConstraintError
		if !errors.As(err, &ce) || ce.OpIndex != 1 {
			return fmt.Errorf("want a constraint error at op 1, got %v", err)
		}
		// The transaction stays usable: discard and persist the rejection.
		if err := tx.DiscardWrites(e.ctx); err != nil {
			return err
		}
		_, err = tx.PutPushResult(e.ctx, "c", "cc", rejection)
		return err
	}))
	got, ok, err := e.s.GetPushResult(e.ctx, "p1", "c", "cc")
	must(t, err)
	if !ok || !bytes.Equal(got.Result, rejection) {
		t.Fatalf("rejection not persisted: %s", got.Result)
	}
	if r, _ := e.s.GetRow(e.ctx, "p1", "tasks", "ok"); r != nil {
		t.Fatal("a discarded write persisted")
	}
	if seq := e.commitTasks("p1", 2, []task{{id: "b", project: "p1", owner: "o1", title: "other"}}, nil); seq != 2 {
		t.Fatalf("next seq = %d", seq)
	}
}

func testTombstones(t *testing.T, h Harness) {
	e := open(t, h)
	k := task{id: "a", project: "p1", owner: "o1"}
	e.commitTasks("p1", 1, []task{k}, nil)
	tomb := func() (int64, bool) {
		var seq int64
		var ok bool
		must(t, e.push("p1", func(tx ports.PushTx) error {
			var err error
			seq, ok, err = tx.TombstoneSeq(e.ctx, "tasks", "a")
			return err
		}))
		return seq, ok
	}
	if _, ok := tomb(); ok {
		t.Fatal("tombstone before any delete")
	}
	seq := e.commitTasks("p1", 2, nil, []task{k})
	if got, ok := tomb(); !ok || got != seq {
		t.Fatalf("tombstone = %d, %v; want %d", got, ok, seq)
	}
	if r, _ := e.s.GetRow(e.ctx, "p1", "tasks", "a"); r != nil {
		t.Fatal("deleted row still readable")
	}
	// An insert over the absent row clears the tombstone.
	e.commitTasks("p1", 3, []task{k}, nil)
	if _, ok := tomb(); ok {
		t.Fatal("tombstone survived a re-insert")
	}
	// A later delete records the newer seq.
	seq = e.commitTasks("p1", 4, nil, []task{k})
	if got, ok := tomb(); !ok || got != seq {
		t.Fatalf("tombstone = %d, %v; want %d", got, ok, seq)
	}
	// Tombstones are per table and partition.
	must(t, e.push("p2", func(tx ports.PushTx) error {
		if _, ok, err := tx.TombstoneSeq(e.ctx, "tasks", "a"); err != nil || ok {
			return fmt.Errorf("tombstone leaked across partitions: %v %v", ok, err)
		}
		return nil
	}))
	// Within one push, the reads of an absent row and its tombstone see
	// the push's own writes in between: a re-insert clears it, a delete
	// (recorded by the commit append) brings it back.
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if r, err := tx.GetRow(e.ctx, "tasks", "a"); err != nil || r != nil {
			return fmt.Errorf("deleted row read as %+v (%v)", r, err)
		}
		if got, ok, err := tx.TombstoneSeq(e.ctx, "tasks", "a"); err != nil || !ok || got != seq {
			return fmt.Errorf("tombstone after the row read = %d, %v (%v); want %d", got, ok, err, seq)
		}
		if err := tx.UpsertRow(e.ctx, "tasks", k.write(0)); err != nil {
			return err
		}
		if r, err := tx.GetRow(e.ctx, "tasks", "a"); err != nil || r == nil {
			return fmt.Errorf("re-inserted row not read back (%v)", err)
		}
		if _, ok, err := tx.TombstoneSeq(e.ctx, "tasks", "a"); err != nil || ok {
			return fmt.Errorf("tombstone survived the push's own re-insert: %v (%v)", ok, err)
		}
		if r, err := tx.GetRow(e.ctx, "tasks", "never"); err != nil || r != nil {
			return fmt.Errorf("absent row read as %+v (%v)", r, err)
		}
		if _, ok, err := tx.TombstoneSeq(e.ctx, "tasks", "never"); err != nil || ok {
			return fmt.Errorf("tombstone of a row never written: %v (%v)", ok, err)
		}
		return tx.DiscardWrites(e.ctx)
	}))
}

func testBlobRefs(t *testing.T, h Harness) {
	e := open(t, h)
	a := task{id: "a", project: "p1", owner: "o1"}
	b := task{id: "b", project: "p2", owner: "o2"}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		for i, k := range []task{a, b} {
			if err := tx.UpsertRow(e.ctx, "tasks", k.write(i)); err != nil {
				return err
			}
		}
		if err := tx.SetBlobRefs(e.ctx, "tasks", "a", []string{"b2", "b1", "b1"}); err != nil {
			return err
		}
		return tx.SetBlobRefs(e.ctx, "tasks", "b", []string{"b2"})
	}))
	refs, err := e.s.ListRowsReferencingBlob(e.ctx, "p1", "b2")
	must(t, err)
	if len(refs) != 2 || refs[0].RowID != "a" || refs[1].RowID != "b" || refs[0].Table != "tasks" ||
		refs[0].Scopes["project"] != "p1" || refs[1].Scopes["owner"] != "o2" {
		t.Fatalf("rows referencing b2 = %+v", refs)
	}
	ids, err := e.s.ListReferencedBlobIDs(e.ctx, "p1")
	must(t, err)
	if !equalStrings(ids, []string{"b1", "b2"}) {
		t.Fatalf("referenced ids = %v", ids)
	}
	if ids, _ := e.s.ListReferencedBlobIDs(e.ctx, "p2"); len(ids) != 0 {
		t.Fatalf("blob refs leaked across partitions: %v", ids)
	}
	// Replacing and clearing.
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if err := tx.SetBlobRefs(e.ctx, "tasks", "a", []string{"b3"}); err != nil {
			return err
		}
		return tx.DeleteRow(e.ctx, "tasks", "b", 0)
	}))
	ids, err = e.s.ListReferencedBlobIDs(e.ctx, "p1")
	must(t, err)
	if !equalStrings(ids, []string{"b3"}) {
		t.Fatalf("referenced ids after replace and delete = %v", ids)
	}
	must(t, e.push("p1", func(tx ports.PushTx) error { return tx.SetBlobRefs(e.ctx, "tasks", "a", nil) }))
	if refs, _ := e.s.ListRowsReferencingBlob(e.ctx, "p1", "b3"); len(refs) != 0 {
		t.Fatalf("cleared refs still listed: %+v", refs)
	}
}

// testBlobClaims: the blob GC (the orphan sweep) claims only blobs no row
// references, staged writes of its own transaction included; claims commit
// and roll back with the transaction, stay per partition, and end on
// release.
func testBlobClaims(t *testing.T, h Harness) {
	e := open(t, h)
	a := task{id: "a", project: "p1", owner: "o1"}
	b := task{id: "b", project: "p1", owner: "o1"}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		for i, k := range []task{a, b} {
			if err := tx.UpsertRow(e.ctx, "tasks", k.write(i)); err != nil {
				return err
			}
		}
		if err := tx.SetBlobRefs(e.ctx, "tasks", "a", []string{"b1"}); err != nil {
			return err
		}
		return tx.SetBlobRefs(e.ctx, "tasks", "b", []string{"b2"})
	}))
	// A rolled-back claim and a discarded one leave nothing.
	errRollback := errors.New("roll back")
	if err := e.push("p1", func(tx ports.PushTx) error {
		if _, err := tx.ClaimOrphanBlobs(e.ctx, []string{"b9"}, 1); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatalf("push = %v", err)
	}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if _, err := tx.ClaimOrphanBlobs(e.ctx, []string{"b9"}, 1); err != nil {
			return err
		}
		return tx.DiscardWrites(e.ctx)
	}))
	if ids, err := e.s.ListBlobClaims(e.ctx, "p1"); err != nil || len(ids) != 0 {
		t.Fatalf("claims after rollback and DiscardWrites = %v %v", ids, err)
	}
	// Row a moves from b1 to b3 in the claiming transaction: b1 is then
	// unreferenced, b3 referenced, b2 still referenced by b.
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if err := tx.SetBlobRefs(e.ctx, "tasks", "a", []string{"b3"}); err != nil {
			return err
		}
		got, err := tx.ClaimOrphanBlobs(e.ctx, []string{"b4", "b3", "b2", "b1", "b4"}, 7)
		if err != nil {
			return err
		}
		if !equalStrings(got, []string{"b1", "b4"}) {
			t.Errorf("claimed %v, want [b1 b4]", got)
		}
		if ok, err := tx.BlobClaimed(e.ctx, "b1"); err != nil || !ok {
			t.Errorf("BlobClaimed(b1) in the claiming transaction = %v %v", ok, err)
		}
		return nil
	}))
	must(t, e.push("p1", func(tx ports.PushTx) error {
		for id, want := range map[string]bool{"b1": true, "b4": true, "b2": false, "b3": false, "b9": false} {
			if ok, err := tx.BlobClaimed(e.ctx, id); err != nil || ok != want {
				t.Errorf("BlobClaimed(%s) = %v %v, want %v", id, ok, err, want)
			}
		}
		// Claiming again returns the standing claim.
		got, err := tx.ClaimOrphanBlobs(e.ctx, []string{"b4"}, 9)
		if err != nil || !equalStrings(got, []string{"b4"}) {
			t.Errorf("claiming b4 again = %v %v", got, err)
		}
		return err
	}))
	must(t, e.push("p2", func(tx ports.PushTx) error {
		if ok, err := tx.BlobClaimed(e.ctx, "b1"); err != nil || ok {
			t.Errorf("a claim of p1 is seen in p2: %v %v", ok, err)
		}
		return nil
	}))
	ids, err := e.s.ListBlobClaims(e.ctx, "p1")
	must(t, err)
	if !equalStrings(ids, []string{"b1", "b4"}) {
		t.Fatalf("claims = %v", ids)
	}
	if ids, _ := e.s.ListBlobClaims(e.ctx, "p2"); len(ids) != 0 {
		t.Fatalf("claims leaked across partitions: %v", ids)
	}
	must(t, e.s.ReleaseBlobClaims(e.ctx, "p1", []string{"b1", "b8"}))
	must(t, e.s.ReleaseBlobClaims(e.ctx, "p1", nil))
	if ids, _ := e.s.ListBlobClaims(e.ctx, "p1"); !equalStrings(ids, []string{"b4"}) {
		t.Fatalf("claims after release = %v", ids)
	}
}

// testBlobClaimsRace: the blob GC's claim and a push referencing the same
// blob (when it sees no claim) race; under the partition lock exactly one wins,
// never both, so a claimed blob is never referenced.
func testBlobClaimsRace(t *testing.T, h Harness) {
	e := open(t, h)
	n := 20
	if raceEnabled {
		n = 8
	}
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range n {
		id := fmt.Sprint("race-", i)
		wg.Go(func() {
			errs[2*i] = e.push("p1", func(tx ports.PushTx) error {
				claimed, err := tx.BlobClaimed(e.ctx, id)
				if err != nil || claimed {
					return err
				}
				k := task{id: id, project: "p1", owner: "o"}
				if err := tx.UpsertRow(e.ctx, "tasks", k.write(0)); err != nil {
					return err
				}
				return tx.SetBlobRefs(e.ctx, "tasks", id, []string{id})
			})
		})
		wg.Go(func() {
			errs[2*i+1] = e.push("p1", func(tx ports.PushTx) error {
				_, err := tx.ClaimOrphanBlobs(e.ctx, []string{id}, 1)
				return err
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	claims, err := e.s.ListBlobClaims(e.ctx, "p1")
	must(t, err)
	referenced, err := e.s.ListReferencedBlobIDs(e.ctx, "p1")
	must(t, err)
	claimed := map[string]bool{}
	for _, id := range claims {
		claimed[id] = true
	}
	for _, id := range referenced {
		if claimed[id] {
			t.Fatalf("blob %s is both claimed and referenced", id)
		}
	}
	if len(claims)+len(referenced) != n {
		t.Fatalf("%d claimed + %d referenced, want %d: every blob goes one way", len(claims), len(referenced), n)
	}
}

func testReactions(t *testing.T, h Harness) {
	e := open(t, h)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		seq, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 50, ActorID: "a", ClientID: "c", ClientCommitID: "cc"})
		if err != nil {
			return err
		}
		return tx.EnqueueReactions(e.ctx, ports.ReactionSource{ClientID: "c", ClientCommitID: "cc", CommitSeq: seq, CreatedAtMs: 50}, []ports.Reaction{
			{IdempotencyKey: "k2", Type: "email", Version: 2, Payload: []byte(`{"to":"x"}`), MaxAttempts: 5, AvailableAtMs: 50},
			{IdempotencyKey: "k1", Type: "email", Version: 1, Payload: []byte(`{"to":"y"}`), MaxAttempts: 10, AvailableAtMs: 60},
		})
	}))
	r, err := e.s.GetReaction(e.ctx, "p1", "k2")
	must(t, err)
	if r == nil || r.Type != "email" || r.Version != 2 || r.Status != ports.ReactionPending || r.Attempts != 0 || r.MaxAttempts != 5 ||
		r.Source.CommitSeq != 1 || r.Source.ClientID != "c" || r.Source.ClientCommitID != "cc" || r.AvailableAtMs != 50 || !jsonEqual(r.Payload, `{"to":"x"}`) {
		t.Fatalf("reaction = %+v", r)
	}
	list, err := e.s.ListReactions(e.ctx, "p1", nil, 10)
	must(t, err)
	if len(list) != 2 || list[0].IdempotencyKey != "k1" || list[1].IdempotencyKey != "k2" {
		t.Fatalf("reactions = %+v", list)
	}
	list, err = e.s.ListReactions(e.ctx, "p1", []ports.ReactionStatus{ports.ReactionCompleted}, 10)
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("completed reactions = %+v", list)
	}
	if r, _ := e.s.GetReaction(e.ctx, "p2", "k1"); r != nil {
		t.Fatal("reaction leaked across partitions")
	}
}

func testLookup(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{
		{id: "a", project: "p1", owner: "o1", title: "x", done: true},
		{id: "b", project: "p1", owner: "o2", title: "y", done: true},
		{id: "c", project: "p2", owner: "o1", title: "z"},
	}, nil)
	e.commitTasks("p2", 1, []task{{id: "d", project: "p1", owner: "o1", title: "w", done: true}}, nil)
	tests := []struct {
		name   string
		equals map[string]any
		limit  int
		want   []string
	}{
		{"one column", map[string]any{"owner_id": "o1"}, 10, []string{"a", "c"}},
		{"two columns", map[string]any{"owner_id": "o1", "project_id": "p1"}, 10, []string{"a"}},
		{"boolean", map[string]any{"done": true}, 10, []string{"a", "b"}},
		{"limit", map[string]any{"done": true}, 1, []string{"a"}},
		{"no match", map[string]any{"title": "nope"}, 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			must(t, e.push("p1", func(tx ports.PushTx) error {
				rows, err := tx.Lookup(e.ctx, ports.RowLookup{Table: "tasks", Equals: tt.equals, Limit: tt.limit})
				if err != nil {
					return err
				}
				if got := rowIDs(rows); !equalStrings(got, tt.want) {
					return fmt.Errorf("lookup %v = %v, want %v", tt.equals, got, tt.want)
				}
				return nil
			}))
		})
	}
}

func testColumnVersions(t *testing.T, h Harness) {
	e := open(t, h)
	cv := commit.EncodeColumnVersions([]int64{1, 1, 1, 3, 2, 1})
	w := task{id: "a", project: "p1", owner: "o1", version: 3}.write(0)
	w.ColumnVersions = cv
	must(t, e.push("p1", func(tx ports.PushTx) error { return tx.UpsertRow(e.ctx, "tasks", w) }))
	r, err := e.s.GetRow(e.ctx, "p1", "tasks", "a")
	must(t, err)
	if r == nil || !bytes.Equal(r.ColumnVersions, cv) || r.Version != 3 || !bytes.Equal(r.Payload, w.Payload) {
		t.Fatalf("row = %+v", r)
	}
	// A fresh insert stores no column versions (NULL).
	e.commitTasks("p1", 2, []task{{id: "b", project: "p1", owner: "o1"}}, nil)
	r, err = e.s.GetRow(e.ctx, "p1", "tasks", "b")
	must(t, err)
	if r.ColumnVersions != nil {
		t.Fatalf("column versions of a fresh insert = %x, want nil", r.ColumnVersions)
	}
	// An empty blob (every column at 1 past the insert: an upsert that
	// presented only the primary key) is not NULL (every column at the
	// row's version, SPEC §2.2), on every read of the row.
	c := task{id: "c", project: "p1", owner: "o1", version: 2}.write(0)
	c.ColumnVersions = commit.EncodeRowColumnVersions([]int64{1, 1, 1, 1, 1, 1}, 2)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "tasks", c); err != nil {
			return err
		}
		r, err := tx.GetRow(e.ctx, "tasks", "c")
		if err == nil && (r == nil || r.ColumnVersions == nil || len(r.ColumnVersions) != 0) {
			err = fmt.Errorf("in the push, column versions %#v, want an empty blob", r)
		}
		return err
	}))
	check := func(how string, r *commit.Row) {
		t.Helper()
		if r == nil || r.ColumnVersions == nil || len(r.ColumnVersions) != 0 {
			t.Fatalf("%s: column versions %#v, want an empty blob", how, r)
		}
	}
	r, err = e.s.GetRow(e.ctx, "p1", "tasks", "c")
	must(t, err)
	check("GetRow", r)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		r, err := tx.GetRow(e.ctx, "tasks", "c")
		if err == nil {
			check("GetRow in a later push", r)
		}
		return err
	}))
	rows, err := e.s.ScanRows(e.ctx, "p1", ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, AfterRowID: "b", Limit: 1})
	must(t, err)
	if len(rows) != 1 {
		t.Fatalf("scan: %d rows", len(rows))
	}
	check("ScanRows", &rows[0])
	if ts, ok := e.s.(ports.TableScanner); ok {
		rows, err := ts.ScanTable(e.ctx, "p1", ports.TableScan{Table: "tasks", AfterRowID: "b", Limit: 1})
		must(t, err)
		if len(rows) != 1 {
			t.Fatalf("table scan: %d rows", len(rows))
		}
		check("ScanTable", &rows[0])
	}
}

// testCancelAllOrNothing cancels the context after staging: the push may
// commit or roll back, but never half.
func testCancelAllOrNothing(t *testing.T, h Harness) {
	e := open(t, h)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	k := task{id: "a", project: "p1", owner: "o1"}
	err := e.s.Push(ctx, "p1", ports.PushOptions{WriterVersion: v1}, func(tx ports.PushTx) error {
		if err := tx.UpsertRow(ctx, "tasks", k.write(0)); err != nil {
			return err
		}
		if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "cc", Changes: []commit.Change{k.upsert()}}); err != nil {
			return err
		}
		if _, err := tx.PutPushResult(ctx, "c", "cc", []byte(`{"status":"applied"}`)); err != nil {
			return err
		}
		cancel()
		return nil
	})
	r, _ := e.s.GetRow(e.ctx, "p1", "tasks", "a")
	_, stored, _ := e.s.GetPushResult(e.ctx, "p1", "c", "cc")
	b := e.bounds("p1")
	committed := r != nil && stored && b.MaxSeq == 1
	nothing := r == nil && !stored && b.MaxSeq == 0
	if !committed && !nothing {
		t.Fatalf("half a push persisted after cancellation (err %v): row %v, result %v, bounds %+v", err, r != nil, stored, b)
	}
	if err == nil && !committed {
		t.Fatal("Push reported success but persisted nothing")
	}
}

func testWaitHonoursContext(t *testing.T, h Harness) {
	e := open(t, h)
	release, done := holdPush(t, e, "p1")
	ctx, cancel := context.WithTimeout(e.ctx, 200*time.Millisecond)
	defer cancel()
	ran := make(chan struct{}, 1)
	waiter := make(chan error, 1)
	go func() {
		waiter <- e.s.Push(ctx, "p1", ports.PushOptions{WriterVersion: v1}, func(tx ports.PushTx) error {
			ran <- struct{}{}
			return nil
		})
	}()
	select {
	case err := <-waiter:
		if err == nil {
			t.Error("a push waiting for the partition lock succeeded after its deadline")
		}
	case <-time.After(15 * time.Second):
		t.Error("a push waiting for the partition lock ignored its deadline")
	}
	select {
	case <-ran:
		t.Error("the waiting push ran its function while the lock was held")
	default:
	}
	close(release)
	must(t, <-done)
	if b := e.bounds("p1"); b.MaxSeq != 1 {
		t.Fatalf("bounds = %+v", b)
	}
}

// testFirstRowHint: PushOptions.FirstRow lets a store read the commit's
// first row ahead; whatever it does, every read is the one a push of its
// own would make. Concurrent pushes (grouped where the engine groups)
// each read the hot row, bump its version and read it back, so a read
// ahead taken before an earlier member's write, or kept past the push's
// own write or discard, shows as a lost update or a stale read.
func testFirstRowHint(t *testing.T, h Harness) {
	e := open(t, h)
	hot := task{id: "hot", project: "p1", owner: "o", title: "v1"}
	e.commitTasks("p1", 1, []task{hot}, nil)
	hint := func(table, rowID string) ports.PushOptions {
		return ports.PushOptions{WriterVersion: v1, FirstRow: ports.RowKey{Table: table, RowID: rowID}}
	}
	bump := func(tx ports.PushTx, cc string, discard, writeLast bool) error {
		r, err := tx.GetRow(e.ctx, "tasks", "hot")
		if err != nil || r == nil {
			return fmt.Errorf("read hot: %v, %v", r, err)
		}
		k := hot
		k.version = r.Version + 1
		if writeLast {
			// The row write is the push's last statement: nothing reads
			// after it, so where writes are held back the next push's
			// reads travel with it.
			if _, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 2, ActorID: "a", ClientID: "c",
				ClientCommitID: cc, Changes: []commit.Change{k.upsert()}}); err != nil {
				return err
			}
			return tx.UpsertRow(e.ctx, "tasks", k.write(0))
		}
		if err := tx.UpsertRow(e.ctx, "tasks", k.write(0)); err != nil {
			return err
		}
		if again, err := tx.GetRow(e.ctx, "tasks", "hot"); err != nil || again == nil || again.Version != k.version {
			return fmt.Errorf("read after own write: %+v, %v; want version %d", again, err, k.version)
		}
		if discard {
			if err := tx.DiscardWrites(e.ctx); err != nil {
				return err
			}
			if back, err := tx.GetRow(e.ctx, "tasks", "hot"); err != nil || back == nil || back.Version != r.Version {
				return fmt.Errorf("read after discard: %+v, %v; want version %d", back, err, r.Version)
			}
			return nil
		}
		_, err = tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 2, ActorID: "a", ClientID: "c", ClientCommitID: cc,
			Changes: []commit.Change{k.upsert()}})
		return err
	}
	opts := []ports.PushOptions{
		hint("tasks", "hot"),
		hint("tasks", "elsewhere"), // names a row the push reads later, never
		hint("no_such_table", "hot"),
		{WriterVersion: v1},
	}
	const workers, each = 8, 6
	var applied atomic.Int64
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				discard, writeLast := n%5 == 4, n%3 == 1
				err := e.s.Push(e.ctx, "p1", opts[n%len(opts)], func(tx ports.PushTx) error {
					return bump(tx, fmt.Sprintf("c%d", n), discard && !writeLast, writeLast)
				})
				discard = discard && !writeLast
				if err == nil && !discard {
					applied.Add(1)
				}
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	r, err := e.s.GetRow(e.ctx, "p1", "tasks", "hot")
	if err != nil || r == nil {
		t.Fatalf("hot row: %v", err)
	}
	if want := 1 + applied.Load(); r.Version != want {
		t.Fatalf("hot row version %d after %d applied bumps, want %d: an update was lost", r.Version, applied.Load(), want)
	}
}

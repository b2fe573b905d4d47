package push_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	dompush "github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestApplyUpdateConflictAndReplay(t *testing.T) {
	e := roundtest.New(t, nil)
	resp, _ := e.Must(e.Req(ssptest.Commit("k1",
		ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1),
		ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-1", "first"), -1))))
	if resp.Header == nil || resp.Header.LogEpoch != e.Epoch || resp.Header.ResetRequired {
		t.Fatalf("header %+v", resp.Header)
	}
	r := resp.Results[0]
	if r.Status != ssp2.PushApplied || r.CommitSeq != 1 || len(r.Results) != 2 {
		t.Fatalf("result %+v", r)
	}
	// A sparse update of the title at base 1 applies (version 2).
	upd := ssptest.Sparse(t, e.Table("tasks"), ssptest.Cols{"id": rowcodec.String("t-1"), "title": rowcodec.String("renamed")})
	resp, _ = e.Must(e.Req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-1", upd, 1))))
	if resp.Results[0].Status != ssp2.PushApplied || resp.Results[0].CommitSeq != 2 {
		t.Fatalf("update %+v", resp.Results[0])
	}
	row, _ := e.Store.GetRow(context.Background(), "p1", "tasks", "t-1")
	if row.Version != 2 || ssptest.DecodeRow(t, e.Table("tasks"), row.Payload)["done"].Bool() {
		t.Fatalf("row %+v", row)
	}
	// Another writer at base 1 touching title conflicts, marking title only;
	// touching only done applies.
	upd2 := ssptest.Sparse(t, e.Table("tasks"), ssptest.Cols{"id": rowcodec.String("t-1"),
		"title": rowcodec.String("mine"), "done": rowcodec.Bool(true)})
	resp, _ = e.Must(e.Req(ssptest.Commit("k3", ssptest.Upsert("tasks", "t-1", upd2, 1))))
	c := resp.Results[0]
	if c.Status != ssp2.PushRejected || len(c.Results) != 1 || c.Results[0].Status != ssp2.OpConflict ||
		c.Results[0].ServerVersion != 2 || !bytes.Equal(c.Results[0].ConflictColumns, dompush.ColumnBitmap(6, []int{2})) ||
		!bytes.Equal(c.Results[0].ServerRow, row.Payload) || c.Results[0].Code != "sync.version_conflict" {
		t.Fatalf("conflict %+v", c)
	}
	done := ssptest.Sparse(t, e.Table("tasks"), ssptest.Cols{"id": rowcodec.String("t-1"), "done": rowcodec.Bool(true)})
	resp, _ = e.Must(e.Req(ssptest.Commit("k4", ssptest.Upsert("tasks", "t-1", done, 1))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("disjoint column %+v", resp.Results[0])
	}
	// Replays: applied → cached with the same seq; the conflict replays as is.
	_, first := e.Must(e.Req(ssptest.Commit("k3", ssptest.Upsert("tasks", "t-1", upd2, 1))))
	_, second := e.Must(e.Req(ssptest.Commit("k3", ssptest.Upsert("tasks", "t-1", upd2, 1))))
	if !bytes.Equal(first, second) {
		t.Fatal("rejected replay differs")
	}
	resp, _ = e.Must(e.Req(ssptest.Commit("k1", ssptest.Delete("tasks", "t-1"))))
	if resp.Results[0].Status != ssp2.PushCached || resp.Results[0].CommitSeq != 1 || len(resp.Results[0].Results) != 2 {
		t.Fatalf("cached %+v", resp.Results[0])
	}
	if b, _ := e.Store.LogBounds(context.Background(), "p1"); b.MaxSeq != 3 {
		t.Fatalf("max seq %d, want 3", b.MaxSeq)
	}
}

func TestDuplicateCommitInOneRequest(t *testing.T) {
	e := roundtest.New(t, nil)
	c := ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))
	resp, _ := e.Must(e.Req(c, c))
	if resp.Results[0].Status != ssp2.PushApplied || resp.Results[1].Status != ssp2.PushCached ||
		resp.Results[1].CommitSeq != resp.Results[0].CommitSeq {
		t.Fatalf("results %+v %+v", resp.Results[0], resp.Results[1])
	}
}

func TestDeletePrecedenceAndRecreate(t *testing.T) {
	e := roundtest.New(t, nil)
	e.Must(e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))))
	resp, _ := e.Must(e.Req(ssptest.Commit("k2", ssptest.Delete("projects", "p-1"), ssptest.Delete("projects", "nope"))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("delete %+v", resp.Results[0])
	}
	resp, _ = e.Must(e.Req(ssptest.Commit("k3", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "Two"), -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, "sync.row_deleted")
	resp, _ = e.Must(e.Req(ssptest.Commit("k4", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "Two"), 0))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("recreate %+v", resp.Results[0])
	}
	partial := ssptest.Sparse(t, e.Table("projects"), ssptest.Cols{"id": rowcodec.String("p-9"), "name": rowcodec.String("x")})
	resp, _ = e.Must(e.Req(ssptest.Commit("k5", ssptest.Upsert("projects", "p-9", partial, -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, "sync.row_missing")
}

func TestAuthorization(t *testing.T) {
	e := roundtest.New(t, func(o *roundtest.Options) {
		o.Round.Resolver = roundtest.ResolverFunc(func(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
			return scopes.Allowed{"owner": {"alice"}, "project_id": {"p-1"}}, nil
		})
	})
	resp, _ := e.Must(e.Req(
		ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1)),
		ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", e.Project("p-2", "bob", "Two"), -1)),
		ssptest.Commit("k3", ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-2", "x"), -1)),
	))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("own scope %+v", resp.Results[0])
	}
	roundtest.WantRejected(t, resp.Results[1], 0, "sync.forbidden")
	roundtest.WantRejected(t, resp.Results[2], 0, "sync.forbidden")
	// A present scope column that changes is refused.
	move := ssptest.Sparse(t, e.Table("projects"), ssptest.Cols{"id": rowcodec.String("p-1"), "owner": rowcodec.String("alice2")})
	resp, _ = e.Must(e.Req(ssptest.Commit("k4", ssptest.Upsert("projects", "p-1", move, -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, "sync.invalid_request")
	// Unknown table and undecodable payload are commit-level.
	resp, _ = e.Must(e.Req(
		ssptest.Commit("k5", ssptest.Upsert("nope", "x", []byte{1}, -1)),
		ssptest.Commit("k6", ssptest.Upsert("projects", "p-1", []byte{0xff, 0xff}, -1)),
	))
	roundtest.WantRejected(t, resp.Results[0], 0, "sync.unknown_table")
	roundtest.WantRejected(t, resp.Results[1], 0, "sync.invalid_request")
}

// gateStore declares an undeclared checkpoint the moment a push begins:
// a migration landing between request entry and the push lock.
type gateStore struct {
	*memory.Store
	version int32
}

func (g *gateStore) Push(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) error {
	if _, err := g.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: partition, Name: "proj", SchemaVersion: g.version}, 1); err != nil {
		return err
	}
	return g.Store.Push(ctx, partition, o, fn)
}

func TestServeGateInsidePush(t *testing.T) {
	var gs *gateStore
	e := roundtest.New(t, func(o *roundtest.Options) {
		gs = &gateStore{Store: o.Store.(*memory.Store), version: 2}
		o.Store = gs
	})
	_, _, err := e.Do(e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))))
	roundtest.WantCode(t, err, syncerr.SchemaNotReady)
	var se *syncerr.Error
	if !errors.As(err, &se) || string(se.Details) != `{"partition":"p1","projection":"proj"}` {
		t.Fatalf("details %s", se.Details)
	}
	if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-1"); row != nil {
		t.Fatal("write landed past the gate")
	}
	if _, ok, _ := e.Store.GetPushResult(context.Background(), "p1", "c1", "k1"); ok {
		t.Fatal("result persisted past the gate")
	}
}

type titleValidator struct{}

func (titleValidator) Table() string { return "tasks" }

func (titleValidator) ValidateRow(ctx context.Context, v ports.RowValidation) error {
	if v.Row == nil {
		return nil
	}
	if v.Row["title"] == "boom" {
		return errors.New("secret engine text")
	}
	p, err := v.Tx.GetRow(ctx, "projects", v.Row["project_id"].(string))
	if err != nil {
		return err
	}
	if p == nil || p.Values["locked"] == true {
		r, err := ports.NewValidationRejection("app.project_locked", "project is locked",
			&ssp2.RejectionDetails{FieldPaths: []string{"project_id"}, Reason: "locked"})
		if err != nil {
			return err
		}
		return r
	}
	return nil
}

func TestRowValidatorSeesStagedWrites(t *testing.T) {
	e := roundtest.New(t, func(o *roundtest.Options) { o.Push.RowValidators = []ports.RowValidator{titleValidator{}} })
	// The project is staged by op 0 and visible to the validator of op 1.
	resp, _ := e.Must(e.Req(ssptest.Commit("k1",
		ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1),
		ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-1", "ok"), -1))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("%+v", resp.Results[0])
	}
	resp, first := e.Must(e.Req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-2", e.Task("t-2", "p-x", "x"), -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, "app.project_locked")
	if d := resp.Details["k2"]; d == nil || d.Entries[0].OpIndex != 0 || d.Entries[0].Details.Reason != "locked" {
		t.Fatalf("details %+v", resp.Details)
	}
	_, second := e.Must(e.Req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-2", e.Task("t-2", "p-x", "x"), -1))))
	if !bytes.Equal(first, second) {
		t.Fatal("replay with details differs")
	}
	// SPEC §6.3.1: the details entry names the opIndex of its error
	// record, whichever operation it is.
	resp, _ = e.Must(e.Req(ssptest.Commit("k2b",
		ssptest.Upsert("tasks", "t-4", e.Task("t-4", "p-1", "fine"), -1),
		ssptest.Upsert("tasks", "t-5", e.Task("t-5", "p-y", "x"), -1))))
	roundtest.WantRejected(t, resp.Results[0], 1, "app.project_locked")
	if d := resp.Details["k2b"]; d == nil || len(d.Entries) != 1 || d.Entries[0].OpIndex != 1 {
		t.Fatalf("details of op 1's rejection %+v", d)
	}
	resp, _ = e.Must(e.Req(ssptest.Commit("k3",
		ssptest.Upsert("projects", "p-2", e.Project("p-2", "alice", "Two"), -1),
		ssptest.Upsert("tasks", "t-3", e.Task("t-3", "p-1", "boom"), -1))))
	roundtest.WantRejected(t, resp.Results[0], 1, "sync.constraint_violation")
	if resp.Results[0].Results[0].Message != "write validator failed" {
		t.Fatalf("message %q", resp.Results[0].Results[0].Message)
	}
	if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-2"); row != nil {
		t.Fatal("sibling write of a rejected commit landed")
	}
}

type commitRule struct{}

func (commitRule) ValidateCommit(ctx context.Context, c ports.CommitValidation) error {
	rows, err := c.Tx.ScanRows(ctx, ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"project_id": {"p-1"}}})
	if err != nil {
		return err
	}
	if len(rows) > 2 {
		return must(ports.RejectOp(len(c.Operations)-1, "app.too_many_tasks", "at most two tasks", nil))
	}
	return nil
}

func must(r *ports.ValidationRejection, err error) error {
	if err != nil {
		return err
	}
	return r
}

type planner struct{}

func (planner) PlanReactions(_ context.Context, c ports.CommitValidation) ([]ports.PlannedReaction, error) {
	return []ports.PlannedReaction{{Key: "notify", Type: "email.send", Version: 1, Payload: json.RawMessage(`{"ops": 1}`)}}, nil
}

func TestCommitValidatorAndReactions(t *testing.T) {
	e := roundtest.New(t, func(o *roundtest.Options) { o.Push.CommitValidator, o.Push.ReactionPlanner = commitRule{}, planner{} })
	resp, _ := e.Must(e.Req(ssptest.Commit("k1",
		ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1),
		ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-1", "a"), -1),
		ssptest.Upsert("tasks", "t-2", e.Task("t-2", "p-1", "b"), -1))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("%+v", resp.Results[0])
	}
	rs, err := e.Store.ListReactions(context.Background(), "p1", nil, 10)
	if err != nil || len(rs) != 1 || rs[0].IdempotencyKey != `["p1","c1","k1","notify"]` || string(rs[0].Payload) != `{"ops":1}` {
		t.Fatalf("reactions %+v %v", rs, err)
	}
	resp, _ = e.Must(e.Req(ssptest.Commit("k2",
		ssptest.Upsert("tasks", "t-3", e.Task("t-3", "p-1", "c"), -1),
		ssptest.Delete("tasks", "nope"))))
	roundtest.WantRejected(t, resp.Results[0], 1, "app.too_many_tasks")
	if rs, _ := e.Store.ListReactions(context.Background(), "p1", nil, 10); len(rs) != 1 {
		t.Fatalf("reactions after rejection: %d", len(rs))
	}
}

func TestConstraintViolation(t *testing.T) {
	e := roundtest.New(t, nil)
	resp, first := e.Must(e.Req(ssptest.Commit("k1",
		ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1),
		ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-1", "same"), -1),
		ssptest.Upsert("tasks", "t-2", e.Task("t-2", "p-1", "same"), -1))))
	roundtest.WantRejected(t, resp.Results[0], 2, "sync.constraint_violation")
	if msg := resp.Results[0].Results[0].Message; msg != syncerr.Lookup(syncerr.ConstraintViolation).Message {
		t.Fatalf("message %q", msg)
	}
	_, second := e.Must(e.Req(ssptest.Commit("k1", ssptest.Delete("tasks", "zz"))))
	if !bytes.Equal(first, second) {
		t.Fatal("constraint rejection replay differs")
	}
	if row, _ := e.Store.GetRow(context.Background(), "p1", "tasks", "t-1"); row != nil {
		t.Fatal("write of a rejected commit landed")
	}
}

func TestBlobReferences(t *testing.T) {
	claimed := "sha256:" + string(bytes.Repeat([]byte("c"), 64))
	present := blobSet{"sha256:" + string(bytes.Repeat([]byte("a"), 64)): true, claimed: true}
	e := roundtest.New(t, func(o *roundtest.Options) { o.Push.Blobs = present })
	e.Must(e.Req(ssptest.Commit("k0", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))))
	ref := func(id string) []byte {
		return ssptest.Sparse(t, e.Table("tasks"), ssptest.Cols{"id": rowcodec.String("t-1"),
			"project_id": rowcodec.String("p-1"), "title": rowcodec.String("x"), "done": rowcodec.Bool(false),
			"estimate": rowcodec.Null(), "attachment": rowcodec.BlobRef(`{"blobId":"` + id + `","byteLength":3}`)})
	}
	resp, _ := e.Must(e.Req(ssptest.Commit("k1", ssptest.Upsert("tasks", "t-1", ref("sha256:"+string(bytes.Repeat([]byte("b"), 64))), -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, "blob.not_found")
	good := "sha256:" + string(bytes.Repeat([]byte("a"), 64))
	resp, _ = e.Must(e.Req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-1", ref(good), -1))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("%+v", resp.Results[0])
	}
	refs, err := e.Store.ListRowsReferencingBlob(context.Background(), "p1", good)
	if err != nil || len(refs) != 1 || refs[0].RowID != "t-1" {
		t.Fatalf("refs %+v %v", refs, err)
	}
	// A stored blob the orphan sweep claimed is absent to a push.
	if err := e.Store.Push(context.Background(), "p1", ports.PushOptions{}, func(tx ports.PushTx) error {
		_, err := tx.ClaimOrphanBlobs(context.Background(), []string{claimed}, 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	resp, _ = e.Must(e.Req(ssptest.Commit("k3", ssptest.Upsert("tasks", "t-1", ref(claimed), -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, "blob.not_found")
}

type blobSet map[string]bool

func (b blobSet) BlobExists(_ context.Context, _, id string) (bool, error) { return b[id], nil }

func TestWireTwo(t *testing.T) {
	refused := roundtest.New(t, nil)
	r := refused.Req()
	r.Wire, r.Pull = 2, true
	if _, _, err := refused.Do(r); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("wire 2 by default: %v", err)
	}
	e := roundtest.New(t, func(o *roundtest.Options) { o.Round.MinWireVersion = 2 })
	full := func(title string) []byte {
		return ssptest.Full(t, e.Table("projects"), ssptest.Cols{"id": rowcodec.String("p-1"),
			"owner": rowcodec.String("alice"), "name": rowcodec.String(title), "locked": rowcodec.Bool(false)})
	}
	r = e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", full("One"), -1)))
	r.Wire = 2
	resp, _ := e.Must(r)
	if resp.Msg.WireVersion != 2 || resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("wire 2 push %+v", resp.Results[0])
	}
	// Another v3 writer moves the row to version 2; a wire-2 write at base 1 conflicts without conflictColumns.
	e.Must(e.Req(ssptest.Commit("k2", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "Two"), 1))))
	r = e.Req(ssptest.Commit("k3", ssptest.Upsert("projects", "p-1", full("Three"), 1)))
	r.Wire = 2
	resp, _ = e.Must(r)
	c := resp.Results[0]
	if c.Status != ssp2.PushRejected || c.Results[0].Status != ssp2.OpConflict || c.Results[0].ConflictColumns != nil {
		t.Fatalf("wire 2 conflict %+v", c)
	}
	// The same stored conflict replays to a wire-3 client with its columns.
	resp, _ = e.Must(e.Req(ssptest.Commit("k3", ssptest.Delete("projects", "zz"))))
	if len(resp.Results[0].Results[0].ConflictColumns) != 1 {
		t.Fatalf("wire 3 replay %+v", resp.Results[0])
	}
}

func TestConcurrentDeliveries(t *testing.T) {
	e := roundtest.New(t, nil)
	body := e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))).Encode(t)
	const n = 100
	out := make([]*ssp2.PushResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := e.Round.Handle(context.Background(), e.ID, body)
			if err != nil {
				t.Error(err)
				return
			}
			out[i] = resp.Frames[1].(*ssp2.PushResult)
		})
	}
	wg.Wait()
	applied := 0
	for _, r := range out {
		if r == nil {
			t.FailNow()
		}
		if r.Status == ssp2.PushApplied {
			applied++
		}
		if r.CommitSeq != 1 || len(r.Results) != 1 {
			t.Fatalf("result %+v", r)
		}
	}
	if applied != 1 {
		t.Fatalf("%d applied deliveries, want 1", applied)
	}
	if b, _ := e.Store.LogBounds(context.Background(), "p1"); b.MaxSeq != 1 {
		t.Fatalf("max seq %d", b.MaxSeq)
	}
}

type recorder struct {
	mu      sync.Mutex
	commits []commit.Commit
}

func (r *recorder) CommitApplied(_ context.Context, partition string, c commit.Commit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if partition == "p1" {
		r.commits = append(r.commits, c)
	}
}

func TestCommitListeners(t *testing.T) {
	rec := &recorder{}
	e := roundtest.New(t, func(o *roundtest.Options) { o.Push.Listeners = []ports.CommitListener{rec} })
	c := ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))
	e.Must(e.Req(c, c))
	e.Must(e.Req(ssptest.Commit("k2", ssptest.Delete("projects", "absent"))))
	e.Must(e.Req(ssptest.Commit("k3", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "Two"), 0))))
	if len(rec.commits) != 1 || rec.commits[0].Seq != 1 || rec.commits[0].ActorID != "alice" ||
		len(rec.commits[0].Changes) != 1 || rec.commits[0].Changes[0].RowVersion != 1 {
		t.Fatalf("announced %+v", rec.commits)
	}
}

func TestWireTwoRejectionDetailsAndCacheMiss(t *testing.T) {
	e := roundtest.New(t, func(o *roundtest.Options) {
		o.Round.MinWireVersion = 2
		o.Push.RowValidators = []ports.RowValidator{titleValidator{}}
	})
	full := ssptest.Full(t, e.Table("tasks"), ssptest.Cols{"id": rowcodec.String("t-1"), "project_id": rowcodec.String("nope"),
		"title": rowcodec.String("x"), "done": rowcodec.Bool(false), "estimate": rowcodec.Null(), "attachment": rowcodec.Null()})
	r := e.Req(ssptest.Commit("k1", ssptest.Upsert("tasks", "t-1", full, -1)))
	r.Wire = 2
	resp, _ := e.Must(r)
	roundtest.WantRejected(t, resp.Results[0], 0, "app.project_locked")
	// An unreadable stored result answers the retryable cache miss, unpersisted.
	err := e.Store.Push(context.Background(), "p1", ports.PushOptions{WriterVersion: 2}, func(tx ports.PushTx) error {
		_, err := tx.PutPushResult(context.Background(), "c1", "k9", []byte(`"garbage"`))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ = e.Must(e.Req(ssptest.Commit("k9", ssptest.Delete("tasks", "x"))))
	m := resp.Results[0]
	if m.Status != ssp2.PushRejected || m.Results[0].Code != "sync.idempotency_cache_miss" || !m.Results[0].Retryable {
		t.Fatalf("cache miss %+v", m)
	}
}

func TestWriterFenceIsNotReady(t *testing.T) {
	e := roundtest.New(t, nil)
	if _, err := e.Store.DeclareCheckpoint(context.Background(),
		checkpoint.Declaration{Partition: "p1", Name: "next", SchemaVersion: e.Schema.Version + 1}, 1); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.Do(e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))))
	roundtest.WantCode(t, err, syncerr.SchemaNotReady)
	if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-1"); row != nil {
		t.Fatal("write landed past the writer fence")
	}
}

func TestCRDTMerge(t *testing.T) {
	note := func(e *roundtest.Env, doc []byte, all bool) []byte {
		c := ssptest.Cols{"id": rowcodec.String("n-1"), "doc": rowcodec.CRDT(doc)}
		if all {
			c["title"], c["body"], c["count"], c["score"] = rowcodec.Null(), rowcodec.String("b"), rowcodec.Null(), rowcodec.Float(1)
			c["done"], c["meta"], c["blob"] = rowcodec.Bool(false), rowcodec.Null(), rowcodec.Null()
		}
		return ssptest.Sparse(t, e.Table("notes"), c)
	}
	grant := func(o *roundtest.Options) {
		o.Round.Resolver = roundtest.ResolverFunc(func(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
			return scopes.Allowed{"id": {"*"}}, nil
		})
	}
	missing := roundtest.New(t, grant)
	resp, _ := missing.Must(missing.Req(ssptest.Commit("k1", ssptest.Upsert("notes", "n-1", note(missing, []byte{5}, true), -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, "sync.crdt_merge_failed")
	if resp.Results[0].Results[0].Message != "CRDT merger failed" {
		t.Fatalf("message %q", resp.Results[0].Results[0].Message)
	}
	e := roundtest.New(t, func(o *roundtest.Options) { grant(o); o.Push.Mergers = []ports.CRDTMerger{ssptest.MaxMerger{}} })
	e.Must(e.Req(ssptest.Commit("k1", ssptest.Upsert("notes", "n-1", note(e, []byte{5}, true), -1))))
	// A crdt-only write at a stale base never conflicts and merges.
	e.Must(e.Req(ssptest.Commit("k2", ssptest.Upsert("notes", "n-1", note(e, []byte{3}, false), -1))))
	resp, _ = e.Must(e.Req(ssptest.Commit("k3", ssptest.Upsert("notes", "n-1", note(e, []byte{9}, false), 1))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("crdt-only write at a stale base: %+v", resp.Results[0])
	}
	row, _ := e.Store.GetRow(context.Background(), "p1", "notes", "n-1")
	if got := ssptest.DecodeRow(t, e.Table("notes"), row.Payload)["doc"].Raw(); !bytes.Equal(got, []byte{9}) || row.Version != 3 {
		t.Fatalf("merged %x at version %d", got, row.Version)
	}
}

// hintStore records the first-row hint of every push.
type hintStore struct {
	*memory.Store
	hints []ports.RowKey
}

func (h *hintStore) Push(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) error {
	h.hints = append(h.hints, o.FirstRow)
	return h.Store.Push(ctx, partition, o, fn)
}

// TestPushNamesItsFirstRow: a push tells the store the row its first
// operation reads (so a store may read it ahead), by the schema's table
// name; a commit whose first operation reads no row names none.
func TestPushNamesItsFirstRow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit func(e *roundtest.Env) *ssp2.PushCommit
		want   ports.RowKey
	}{
		{"upsert", func(e *roundtest.Env) *ssp2.PushCommit {
			return ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))
		}, ports.RowKey{Table: "projects", RowID: "p-1"}},
		{"delete", func(*roundtest.Env) *ssp2.PushCommit {
			return ssptest.Commit("k1", ssptest.Delete("projects", "p-2"))
		}, ports.RowKey{Table: "projects", RowID: "p-2"}},
		{"unknown table", func(*roundtest.Env) *ssp2.PushCommit {
			return ssptest.Commit("k1", ssptest.Upsert("nope", "p-1", []byte{0}, -1))
		}, ports.RowKey{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hs *hintStore
			e := roundtest.New(t, func(o *roundtest.Options) {
				hs = &hintStore{Store: o.Store.(*memory.Store)}
				o.Store = hs
			})
			_, _, _ = e.Do(e.Req(tc.commit(e)))
			if len(hs.hints) != 1 || hs.hints[0] != tc.want {
				t.Fatalf("hints %+v, want [%+v]", hs.hints, tc.want)
			}
		})
	}
}

// rejectAt is a whole-commit validator that rejects every commit with r.
type rejectAt struct{ r *ports.ValidationRejection }

func (v rejectAt) ValidateCommit(context.Context, ports.CommitValidation) error { return v.r }

// TestCommitRejectionAttribution reads like SPEC §6.8 "Rejection
// attribution": an attributed rejection names an operation of the commit;
// a plain one lands on the first operation; an index outside the commit,
// negative included, is a host bug answered with sync.constraint_violation.
func TestCommitRejectionAttribution(t *testing.T) {
	plain, err := ports.NewValidationRejection("app.rule", "no", nil)
	if err != nil {
		t.Fatal(err)
	}
	at := func(i int) *ports.ValidationRejection {
		r, err := ports.RejectOp(i, "app.rule", "no", nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name   string
		r      *ports.ValidationRejection
		wantAt int32
		code   string
	}{
		{"plain: the first operation", plain, 0, "app.rule"},
		{"attributed to the second operation", at(1), 1, "app.rule"},
		{"attributed to the last operation", at(2), 2, "app.rule"},
		{"negative index", at(-1), 0, "sync.constraint_violation"},
		{"past the commit", at(3), 0, "sync.constraint_violation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := roundtest.New(t, func(o *roundtest.Options) { o.Push.CommitValidator = rejectAt{tt.r} })
			resp, _ := e.Must(e.Req(ssptest.Commit("k1",
				ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1),
				ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-1", "a"), -1),
				ssptest.Upsert("tasks", "t-2", e.Task("t-2", "p-1", "b"), -1))))
			roundtest.WantRejected(t, resp.Results[0], tt.wantAt, tt.code)
			if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-1"); row != nil {
				t.Fatal("a write of the rejected commit landed")
			}
		})
	}
}

// switchValidator is a row or commit validator whose backend can be down.
type switchValidator struct{ down bool }

func (*switchValidator) Table() string { return "tasks" }

func (s *switchValidator) ValidateRow(context.Context, ports.RowValidation) error { return s.check() }

func (s *switchValidator) ValidateCommit(context.Context, ports.CommitValidation) error {
	return s.check()
}

func (s *switchValidator) check() error {
	if s.down {
		return fmt.Errorf("rules service: %w", ports.ErrValidatorUnavailable)
	}
	return nil
}

// TestUnavailableValidatorFailsTheRequestRetryable: a validator that
// cannot decide (ports.ErrValidatorUnavailable) neither applies nor
// rejects its commit: the request fails with the retryable
// sync.rate_limited, no result is stored, and the same commit applies
// once the validator is back. An earlier commit of the request stays
// applied and replays.
func TestUnavailableValidatorFailsTheRequestRetryable(t *testing.T) {
	for _, kind := range []string{"row", "commit"} {
		t.Run(kind, func(t *testing.T) {
			v := &switchValidator{}
			e := roundtest.New(t, func(o *roundtest.Options) {
				if kind == "row" {
					o.Push.RowValidators = []ports.RowValidator{v}
				} else {
					o.Push.CommitValidator = v
				}
			})
			first := ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))
			second := ssptest.Commit("k2", ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-1", "a"), -1))
			if kind == "commit" {
				e.Must(e.Req(first))
			}
			v.down = true
			_, _, err := e.Do(e.Req(first, second))
			roundtest.WantCode(t, err, syncerr.RateLimited)
			if se := syncerr.Public(err); !se.Entry().Retryable {
				t.Fatalf("%v is not retryable", err)
			}
			e.NoRow(t, "t-1")
			if _, ok, _ := e.Store.GetPushResult(context.Background(), "p1", "c1", "k2"); ok {
				t.Fatal("the undecided commit's result was stored")
			}
			if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-1"); row == nil {
				t.Fatal("the earlier commit of the request was not applied")
			}
			v.down = false
			resp, _ := e.Must(e.Req(first, second))
			if resp.Results[0].Status != ssp2.PushCached || resp.Results[1].Status != ssp2.PushApplied {
				t.Fatalf("retry: %+v, %+v", resp.Results[0], resp.Results[1])
			}
		})
	}
}

// rejectAs rejects every commit with its code, counting its calls.
type rejectAs struct {
	code  string
	calls *int
}

func (r rejectAs) ValidateCommit(context.Context, ports.CommitValidation) error {
	*r.calls++
	if r.code == "" {
		return nil
	}
	return must(ports.RejectOp(0, r.code, "no", nil))
}

// TestCommitValidatorsRunInOrder: several whole-commit validators are
// one (SPEC §6.8 has one): each runs in order, the first rejection
// decides, and the ones after it do not run.
func TestCommitValidatorsRunInOrder(t *testing.T) {
	if push.CommitValidators(nil, nil) != nil {
		t.Fatal("no validator must be nil: the pipeline skips its candidate work")
	}
	var a, b, c int
	e := roundtest.New(t, func(o *roundtest.Options) {
		o.Push.CommitValidator = push.CommitValidators(rejectAs{calls: &a}, nil, rejectAs{code: "app.second", calls: &b}, rejectAs{code: "app.third", calls: &c})
	})
	resp, _ := e.Must(e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, "app.second")
	if a != 1 || b != 1 || c != 0 {
		t.Fatalf("calls %d, %d, %d", a, b, c)
	}
}

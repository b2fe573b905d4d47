// Package e2e runs syncd over HTTP on SQLite and PostgreSQL and talks to it
// with real SSP2 request bytes.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func project(t *testing.T, s *schema.Schema, id, owner, name string) []byte {
	return ssptest.Sparse(t, s.Table("projects"), ssptest.Cols{"id": rowcodec.String(id),
		"owner": rowcodec.String(owner), "name": rowcodec.String(name), "locked": rowcodec.Bool(false)})
}

func task(t *testing.T, s *schema.Schema, id, projectID, title string) []byte {
	return ssptest.Sparse(t, s.Table("tasks"), ssptest.Cols{"id": rowcodec.String(id),
		"project_id": rowcodec.String(projectID), "title": rowcodec.String(title), "done": rowcodec.Bool(false),
		"estimate": rowcodec.Null(), "attachment": rowcodec.Null()})
}

func rejected(t *testing.T, r *ssp2.PushResult, opIndex int32, code string) {
	t.Helper()
	if r.Status != ssp2.PushRejected || len(r.Results) != 1 || r.Results[0].OpIndex != opIndex || r.Results[0].Code != code {
		t.Fatalf("result %+v: want rejected at op %d with %s", r, opIndex, code)
	}
}

func TestPushAppliedConflictReplay(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{}
		ep := s.epoch(c)
		req := func(commits ...*ssp2.PushCommit) ssptest.Req {
			return ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: commits}
		}
		resp, _ := s.sync(c, req(ssptest.Commit("k1",
			ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1),
			ssptest.Upsert("tasks", "t-1", task(t, s.sch, "t-1", "p-1", "first"), -1))))
		if r := resp.Results[0]; r.Status != ssp2.PushApplied || r.CommitSeq != 1 || len(r.Results) != 2 {
			t.Fatalf("applied %+v", r)
		}
		tasks := s.sch.Table("tasks")
		rename := ssptest.Sparse(t, tasks, ssptest.Cols{"id": rowcodec.String("t-1"), "title": rowcodec.String("second")})
		resp, _ = s.sync(c, req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-1", rename, 1))))
		if r := resp.Results[0]; r.Status != ssp2.PushApplied || r.CommitSeq != 2 {
			t.Fatalf("update %+v", r)
		}
		// A stale writer touching the title conflicts with exactly that column.
		stale := ssptest.Sparse(t, tasks, ssptest.Cols{"id": rowcodec.String("t-1"),
			"title": rowcodec.String("third"), "done": rowcodec.Bool(true)})
		resp, first := s.sync(c, req(ssptest.Commit("k3", ssptest.Upsert("tasks", "t-1", stale, 1))))
		cf := resp.Results[0]
		if cf.Status != ssp2.PushRejected || cf.Results[0].Status != ssp2.OpConflict || cf.Results[0].ServerVersion != 2 ||
			!bytes.Equal(cf.Results[0].ConflictColumns, push.ColumnBitmap(len(tasks.Columns), []int{2})) {
			t.Fatalf("conflict %+v", cf)
		}
		if got := ssptest.DecodeRow(t, tasks, cf.Results[0].ServerRow)["title"].Text(); got != "second" {
			t.Fatalf("server row title %q", got)
		}
		_, again := s.sync(c, req(ssptest.Commit("k3", ssptest.Upsert("tasks", "t-1", stale, 1))))
		if !bytes.Equal(first, again) {
			t.Fatal("conflict replay is not byte-identical")
		}
		// Cached replay of an applied commit: same seq, nothing reapplied.
		resp, _ = s.sync(c, req(ssptest.Commit("k1", ssptest.Delete("tasks", "t-1"))))
		if r := resp.Results[0]; r.Status != ssp2.PushCached || r.CommitSeq != 1 || len(r.Results) != 2 {
			t.Fatalf("cached %+v", r)
		}
		if row, err := s.store.GetRow(context.Background(), "default", "tasks", "t-1"); err != nil || row == nil || row.Version != 2 {
			t.Fatalf("row after replay %+v %v", row, err)
		}
		// Delete precedence over a concurrent unversioned upsert.
		s.sync(c, req(ssptest.Commit("k4", ssptest.Delete("tasks", "t-1"))))
		resp, _ = s.sync(c, req(ssptest.Commit("k5", ssptest.Upsert("tasks", "t-1", task(t, s.sch, "t-1", "p-1", "x"), -1))))
		rejected(t, resp.Results[0], 0, "sync.row_deleted")
		// Compressed request and response.
		rep := s.post(call{encoding: "gzip", acceptEncoding: "gzip"}, req(ssptest.Commit("k6",
			ssptest.Upsert("tasks", "t-1", task(t, s.sch, "t-1", "p-1", "x"), 0))).Encode(t))
		if rep.status != http.StatusOK || ssptest.DecodeResponse(t, rep.body).Results[0].Status != ssp2.PushApplied {
			t.Fatalf("gzip round trip: %d %x", rep.status, rep.body)
		}
	})
}

type lockValidator struct{}

func (lockValidator) Table() string { return "tasks" }

func (lockValidator) ValidateRow(ctx context.Context, v ports.RowValidation) error {
	if v.Row == nil {
		return nil
	}
	// Authority read inside the push transaction: sees the commit's staged rows.
	rows, err := v.Tx.Query(ctx, ports.RowLookup{Table: "projects", Equals: map[string]any{"id": v.Row["project_id"]}, Limit: 1})
	if err != nil {
		return err
	}
	if len(rows) == 0 || rows[0].Values["locked"] == true {
		r, err := ports.NewValidationRejection("app.project_locked", "project is locked or missing",
			&ssp2.RejectionDetails{FieldPaths: []string{"project_id"}, Reason: "project_locked"})
		if err != nil {
			return err
		}
		return r
	}
	if v.Row["title"] == "explode" {
		return errors.New("validator bug with internal detail")
	}
	return nil
}

func TestValidatorAndConstraintRejections(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{extra: []fx.Option{app.ProvideRowValidator(func() lockValidator { return lockValidator{} })}})
		c := call{}
		ep := s.epoch(c)
		req := func(commits ...*ssp2.PushCommit) ssptest.Req {
			return ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: commits}
		}
		resp, _ := s.sync(c, req(ssptest.Commit("k1",
			ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1),
			ssptest.Upsert("tasks", "t-1", task(t, s.sch, "t-1", "p-1", "a"), -1))))
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("staged parent not visible to the validator: %+v", resp.Results[0])
		}
		resp, first := s.sync(c, req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-2", task(t, s.sch, "t-2", "p-9", "b"), -1))))
		rejected(t, resp.Results[0], 0, "app.project_locked")
		if d := resp.Details["k2"]; d == nil || d.Entries[0].Details.Reason != "project_locked" {
			t.Fatalf("details %+v", resp.Details)
		}
		// Byte for byte as SPEC §6.3 and §6.3.1 lay them out, written by
		// hand: the rejected result (no commitSeq; opIndex 0, status
		// error, code, message, not retryable) and its details right after.
		wantFrames := new(ssptest.Bytes).
			Frame(0x11, new(ssptest.Bytes).Str("k2").U8(3).Absent().U32(1).I32(0).U8(3).
				Str("app.project_locked").Str("project is locked or missing").U8(0)).
			Frame(0x1B, new(ssptest.Bytes).Str("k2").U32(1).I32(0).Str(`{"fieldPaths":["project_id"],"reason":"project_locked"}`)).B
		if !bytes.Contains(first, wantFrames) {
			t.Fatalf("response %x\ndoes not hold the spec's frames\n%x", first, wantFrames)
		}
		_, again := s.sync(c, req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-2", task(t, s.sch, "t-2", "p-9", "b"), -1))))
		if !bytes.Equal(first, again) {
			t.Fatal("validator rejection replay differs")
		}
		resp, _ = s.sync(c, req(ssptest.Commit("k3", ssptest.Upsert("tasks", "t-3", task(t, s.sch, "t-3", "p-1", "explode"), -1))))
		rejected(t, resp.Results[0], 0, "sync.constraint_violation")
		if m := resp.Results[0].Results[0].Message; m != "write validator failed" {
			t.Fatalf("message %q", m)
		}
		// Unique (project_id, title): the database refuses op 1.
		resp, first = s.sync(c, req(ssptest.Commit("k4",
			ssptest.Upsert("tasks", "t-4", task(t, s.sch, "t-4", "p-1", "dup"), -1),
			ssptest.Upsert("tasks", "t-5", task(t, s.sch, "t-5", "p-1", "dup"), -1))))
		rejected(t, resp.Results[0], 1, "sync.constraint_violation")
		if m := resp.Results[0].Results[0].Message; m != syncerr.Lookup(syncerr.ConstraintViolation).Message {
			t.Fatalf("constraint message %q", m)
		}
		_, again = s.sync(c, req(ssptest.Commit("k4", ssptest.Delete("tasks", "t-4"))))
		if !bytes.Equal(first, again) {
			t.Fatal("constraint rejection replay differs")
		}
		// No engine text in the response or the logs (SQLite's "UNIQUE
		// constraint failed: …", PostgreSQL's "duplicate key value violates
		// unique constraint …" / SQLSTATE 23505, the index name).
		engineText := []string{"constraint failed", "duplicate key", "violates", "sqlstate", "23505", "sync_ix_"}
		for _, f := range engineText {
			if bytes.Contains(bytes.ToLower(first), []byte(f)) {
				t.Fatalf("response carries %q", f)
			}
		}
		s.noLoggedText(engineText...)
		if row, _ := s.store.GetRow(context.Background(), "default", "tasks", "t-4"); row != nil {
			t.Fatal("a write of the rejected commit landed")
		}
		// The next commit still applies.
		resp, _ = s.sync(c, req(ssptest.Commit("k5", ssptest.Upsert("tasks", "t-4", task(t, s.sch, "t-4", "p-1", "dup"), -1))))
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("after constraint %+v", resp.Results[0])
		}
	})
}

// TestBlobReferenceWithoutBlob: a non-NULL blob_ref naming a blob the
// server does not hold rejects its commit with blob.not_found at that
// operation (SPEC §6.6); this server has no blob store, so every such
// reference is absent. A NULL blob_ref applies.
func TestBlobReferenceWithoutBlob(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{}
		ep := s.epoch(c)
		req := func(commits ...*ssp2.PushCommit) ssptest.Req {
			return ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: commits}
		}
		withBlob := ssptest.Sparse(t, s.sch.Table("tasks"), ssptest.Cols{"id": rowcodec.String("t-2"),
			"project_id": rowcodec.String("p-1"), "title": rowcodec.String("b"), "done": rowcodec.Bool(false),
			"estimate": rowcodec.Null(), "attachment": rowcodec.BlobRef(`{"blobId":"sha256:` + strings.Repeat("a", 64) + `","byteLength":3}`)})
		resp, _ := s.sync(c, req(ssptest.Commit("k1",
			ssptest.Upsert("tasks", "t-1", task(t, s.sch, "t-1", "p-1", "a"), -1),
			ssptest.Upsert("tasks", "t-2", withBlob, -1))))
		rejected(t, resp.Results[0], 1, "blob.not_found")
		for _, id := range []string{"t-1", "t-2"} {
			if row, _ := s.store.GetRow(context.Background(), "default", "tasks", id); row != nil {
				t.Fatalf("row %s of the rejected commit landed", id)
			}
		}
		if b, _ := s.store.LogBounds(context.Background(), "default"); b.MaxSeq != 0 {
			t.Fatalf("log advanced to %d", b.MaxSeq)
		}
	})
}

func TestAuthorizationOverHTTP(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{actor: "alice", scopes: `{"owner":["alice"],"project_id":["p-1"]}`}
		ep := s.epoch(c)
		req := func(commits ...*ssp2.PushCommit) ssptest.Req {
			return ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: commits}
		}
		resp, _ := s.sync(c, req(
			ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)),
			ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", project(t, s.sch, "p-2", "bob", "Two"), -1)),
		))
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("own scope %+v", resp.Results[0])
		}
		rejected(t, resp.Results[1], 0, "sync.forbidden")
		move := ssptest.Sparse(t, s.sch.Table("projects"), ssptest.Cols{"id": rowcodec.String("p-1"), "owner": rowcodec.String("carol")})
		resp, _ = s.sync(c, req(ssptest.Commit("k3", ssptest.Upsert("projects", "p-1", move, -1))))
		rejected(t, resp.Results[0], 0, "sync.invalid_request")
		// A client id is bound to its actor in the partition once a pull has
		// recorded the client; another actor using it is refused, in any
		// request.
		s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true, SubTable: "projects"})
		r := req(ssptest.Commit("k4", ssptest.Delete("projects", "x")))
		s.jsonError(s.post(call{actor: "bob"}, r.Encode(t)), http.StatusBadRequest, syncerr.InvalidClientID)
		if resp, _ := s.sync(call{actor: "bob", partition: "other"}, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, NoEpoch: true, Pull: true}); !resp.Header.ResetRequired {
			t.Fatalf("the same client id in another partition: %+v", resp.Msg.Frames)
		}
		// The reserved prefix is refused.
		r = req(ssptest.Commit("k4", ssptest.Delete("projects", "x")))
		r.ClientID = `["remote-command","alice","c1"]`
		s.jsonError(s.post(c, r.Encode(t)), http.StatusBadRequest, syncerr.InvalidClientID)
		// Operation cap is request-level.
		ops := make([]ssp2.PushOperation, 501)
		for i := range ops {
			ops[i] = ssptest.Delete("projects", "x")
		}
		s.jsonError(s.post(c, req(ssptest.Commit("k5", ops...)).Encode(t)), http.StatusBadRequest, syncerr.TooManyOperations)
	})
}

func TestSchemaFloorEpochAndGate(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{}
		ep := s.epoch(c)
		commit := ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1))
		resp, _ := s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: 1, Epoch: ep, Commits: []*ssp2.PushCommit{commit}})
		if h := resp.Header; len(resp.Msg.Frames) != 1 || h.RequiredSchemaVersion.Value != s.sch.Version ||
			!h.LatestSchemaVersion.Present || h.LogEpoch != ep {
			t.Fatalf("schema floor %+v", resp.Msg.Frames)
		}
		// A different or absent epoch: header-only reset, the push not applied
		// (checked below with the gate: p-1 never lands).
		for _, r := range []ssptest.Req{
			{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: "stale", Commits: []*ssp2.PushCommit{commit}},
			{ClientID: "c1", SchemaVersion: s.sch.Version, NoEpoch: true, Commits: []*ssp2.PushCommit{commit}},
		} {
			resp, _ = s.sync(c, r)
			if len(resp.Msg.Frames) != 1 || !resp.Header.ResetRequired || resp.Header.LogEpoch != ep {
				t.Fatalf("epoch reset %+v", resp.Msg.Frames)
			}
		}
		// A checkpoint lands between request entry and the push lock: the
		// gate read inside the push transaction refuses and nothing lands.
		s.store.armed.Store(true)
		rep := s.post(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{commit}}.Encode(t))
		body := s.jsonError(rep, http.StatusServiceUnavailable, syncerr.SchemaNotReady)
		if d, _ := body["details"].(map[string]any); d["projection"] != "projection" || d["partition"] != "default" {
			t.Fatalf("gate details %v", body)
		}
		if row, _ := s.store.GetRow(context.Background(), "default", "projects", "p-1"); row != nil {
			t.Fatal("write landed past the serve gate")
		}
		if _, ok, _ := s.store.GetPushResult(context.Background(), "default", "c1", "k1"); ok {
			t.Fatal("result persisted past the serve gate")
		}
		if b, _ := s.store.LogBounds(context.Background(), "default"); b.MaxSeq != 0 {
			t.Fatalf("log advanced to %d", b.MaxSeq)
		}
	})
}

func TestWireTwoAdmission(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		full := func(s *server, name string) []byte {
			return ssptest.Full(t, s.sch.Table("projects"), ssptest.Cols{"id": rowcodec.String("p-1"),
				"owner": rowcodec.String("alice"), "name": rowcodec.String(name), "locked": rowcodec.Bool(false)})
		}
		strict := start(t, e, serverOpts{})
		c := call{}
		ep := strict.epoch(c)
		r := ssptest.Req{Wire: 2, ClientID: "c2", SchemaVersion: strict.sch.Version, Epoch: ep,
			Commits: []*ssp2.PushCommit{ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", full(strict, "One"), -1))}}
		body := strict.jsonError(strict.post(c, r.Encode(t)), http.StatusBadRequest, syncerr.InvalidRequest)
		if msg, _ := body["message"].(string); !strings.Contains(msg, "wire version 2") || !strings.Contains(msg, "--min-wire-version 2") {
			t.Fatalf("the refusal does not say why: %q", msg)
		}

		s := start(t, e, serverOpts{minWire: 2})
		ep = s.epoch(c)
		r.Epoch = ep
		resp, _ := s.sync(c, r)
		if resp.Msg.WireVersion != 2 || resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("wire 2 push %+v", resp.Msg.Frames)
		}
		s.sync(c, ssptest.Req{ClientID: "c3", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "Two"), 1))}})
		r.Commits = []*ssp2.PushCommit{ssptest.Commit("k2", ssptest.Upsert("projects", "p-1", full(s, "Three"), 1))}
		resp, _ = s.sync(c, r)
		if cf := resp.Results[0]; cf.Status != ssp2.PushRejected || cf.Results[0].Status != ssp2.OpConflict || cf.Results[0].ConflictColumns != nil {
			t.Fatalf("wire 2 conflict %+v", cf)
		}
	})
}

// TestWireOneProducer: a database-less commit producer of the 0.15
// window (SPEC 0.15 §6.10) pushes wire-1 envelopes without a log epoch.
// Without --min-wire-version 1 it is refused with a message naming the
// setting; with it its commit is applied and answered in wire 1, a retry
// is answered from the stored result, and once the partition's epoch was
// rotated (a restore) it is refused with sync.client_wire_unsupported,
// nothing applied.
func TestWireOneProducer(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		c := call{actor: "svc", scopes: `{"owner":["alice"]}`}
		produce := func(s *server, key, id, name string) []byte {
			row := ssptest.Full(t, s.sch.Table("projects"), ssptest.Cols{"id": rowcodec.String(id),
				"owner": rowcodec.String("alice"), "name": rowcodec.String(name), "locked": rowcodec.Bool(false)})
			return ssptest.Req{Wire: 1, ClientID: "producer", SchemaVersion: s.sch.Version,
				Commits: []*ssp2.PushCommit{ssptest.Commit(key, ssptest.Upsert("projects", id, row, -1))}}.Encode(t)
		}
		stored := func(s *server, id string) *commit.Row {
			t.Helper()
			r, err := s.store.GetRow(context.Background(), "default", "projects", id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}

		strict := start(t, e, serverOpts{})
		body := strict.jsonError(strict.post(c, produce(strict, "k1", "p-1", "One")), http.StatusBadRequest, syncerr.InvalidRequest)
		if msg, _ := body["message"].(string); !strings.Contains(msg, "wire version 1") || !strings.Contains(msg, "--min-wire-version 1") {
			t.Fatalf("the refusal does not say why: %q", msg)
		}
		if stored(strict, "p-1") != nil {
			t.Fatal("a refused wire-1 push was applied")
		}

		s := start(t, e, serverOpts{minWire: 1})
		for i, want := range []ssp2.PushStatus{ssp2.PushApplied, ssp2.PushCached} {
			rep := s.post(c, produce(s, "k1", "p-1", "One"))
			if rep.status != http.StatusOK {
				t.Fatalf("delivery %d: %d %s", i, rep.status, rep.body)
			}
			resp := ssptest.DecodeResponse(t, rep.body)
			if resp.Msg.WireVersion != 1 || resp.Header.LogEpoch != "" || resp.Header.LatestSchemaVersion != ssp2.Some(s.sch.Version) {
				t.Fatalf("delivery %d answered in wire %d with %+v", i, resp.Msg.WireVersion, resp.Header)
			}
			if r := resp.Results[0]; r.Status != want || r.CommitSeq != 1 {
				t.Fatalf("delivery %d: %+v, want %s at seq 1", i, r, want)
			}
		}
		if r := stored(s, "p-1"); r == nil || r.Version != 1 || r.Scopes["owner"] != "alice" {
			t.Fatalf("stored row %+v", r)
		}

		if _, err := s.store.RotateLogEpoch(context.Background(), "default"); err != nil {
			t.Fatal(err)
		}
		body = s.jsonError(s.post(c, produce(s, "k2", "p-2", "Two")), http.StatusBadRequest, syncerr.ClientWireUnsupported)
		if body["recommendedAction"] != "upgradeClient" || body["category"] != "schema-mismatch" {
			t.Fatalf("refusal after rotation %v", body)
		}
		if stored(s, "p-2") != nil {
			t.Fatal("a wire-1 push after the rotation was applied")
		}
	})
}

func TestConcurrentDeliveriesOfOneCommit(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{}
		ep := s.epoch(c)
		body := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1))}}.Encode(t)
		const n = 100
		results := make([]*ssp2.PushResult, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				rep := s.post(c, body)
				if rep.status != http.StatusOK {
					t.Errorf("delivery %d: %d %s", i, rep.status, rep.body)
					return
				}
				m, err := ssp2.Decode(rep.body)
				if err != nil {
					t.Error(err)
					return
				}
				results[i] = ssptest.Split(m).Results[0]
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		applied := 0
		for _, r := range results {
			if r.Status == ssp2.PushApplied {
				applied++
			} else if r.Status != ssp2.PushCached {
				t.Fatalf("status %s", r.Status)
			}
			if r.CommitSeq != 1 || len(r.Results) != 1 {
				t.Fatalf("result %+v", r)
			}
		}
		if applied != 1 {
			t.Fatalf("%d deliveries applied", applied)
		}
		if b, _ := s.store.LogBounds(context.Background(), "default"); b.MaxSeq != 1 {
			t.Fatalf("max seq %d", b.MaxSeq)
		}
	})
}

func TestMalformedBodies(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{}
		for _, b := range [][]byte{nil, []byte("SSP2"), []byte("not ssp2 at all"), bytes.Repeat([]byte{0xff}, 64)} {
			s.jsonError(s.post(c, b), http.StatusBadRequest, syncerr.InvalidRequest)
		}
		s.jsonError(s.post(call{contentType: "application/json"}, []byte("{}")), http.StatusUnsupportedMediaType, syncerr.InvalidRequest)
		s.jsonError(s.post(c, make([]byte, 17<<20)), http.StatusRequestEntityTooLarge, syncerr.InvalidRequest)
		// A subscription on an unknown table fails the whole request (§4.3).
		ep := s.epoch(c)
		s.jsonError(s.post(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true, SubTable: "nope"}.Encode(t)),
			http.StatusBadRequest, syncerr.UnknownTable)
		// Every invalid request vector of both generations, the older ones
		// also to servers that admit wire 2 and wire 1, whose decoder then
		// reads them through (last: a missing vectors directory skips only
		// this part, loudly).
		wire2 := start(t, e, serverOpts{minWire: 2})
		wire1 := start(t, e, serverOpts{minWire: 1})
		for _, gen := range []string{"v3", "v2"} {
			m, ok := vectortest.Load(t, vectortest.Dir(t, gen), "request")
			if !ok || len(m.Invalid) == 0 {
				t.Fatalf("no invalid request vectors in %s", gen)
			}
			for _, inv := range m.Invalid {
				body := m.Read(t, inv.Bin)
				s.jsonError(s.post(c, body), http.StatusBadRequest, syncerr.Code(inv.Error))
				wire2.jsonError(wire2.post(c, body), http.StatusBadRequest, syncerr.Code(inv.Error))
				wire1.jsonError(wire1.post(c, body), http.StatusBadRequest, syncerr.Code(inv.Error))
			}
		}
	})
}

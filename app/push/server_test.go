package push_test

import (
	"context"
	"errors"
	"testing"

	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

type heard struct {
	commits []commit.Commit
	events  []event.Event
}

func (h *heard) Emit(e event.Event) { h.events = append(h.events, e) }

func (h *heard) CommitApplied(_ context.Context, _ string, c commit.Commit) {
	h.commits = append(h.commits, c)
}

// TestServerCommit: a server commit runs the push pipeline with every
// scope granted (rows of any owner), runs AfterAppend in its transaction
// with its seq, is heard by the commit listeners, replays as cached, and
// a rejection is a *RejectedError that wrote nothing; an AfterAppend
// error rolls the commit back.
func TestServerCommit(t *testing.T) {
	h := &heard{}
	e := roundtest.New(t, func(o *roundtest.Options) { o.Push.Listeners, o.Events = []ports.CommitListener{h}, h })
	ctx := context.Background()
	var seenSeq int64
	c := push.ServerCommit{Partition: "p1", ActorID: "server", ClientID: "job", ClientCommitID: "b1",
		Operations: []ssp2.PushOperation{
			ssptest.Upsert("projects", "pa", e.Project("pa", "alice", "A"), -1),
			ssptest.Upsert("projects", "pb", e.Project("pb", "bob", "B"), -1),
		},
		AfterAppend: func(_ context.Context, _ ports.PushTx, seq int64) error { seenSeq = seq; return nil }}
	res, err := e.Push.ApplyServerCommit(ctx, c)
	if err != nil || res.Status != ssp2.PushApplied || res.CommitSeq != 1 || seenSeq != 1 {
		t.Fatalf("apply = %+v, %v (after append saw %d)", res, err, seenSeq)
	}
	if len(h.commits) != 1 || len(h.commits[0].Changes) != 2 || h.commits[0].ClientID != "job" {
		t.Fatalf("listeners heard %+v", h.commits)
	}
	if len(h.events) != 1 {
		t.Fatalf("events %+v", h.events)
	}
	if ev, ok := h.events[0].(event.PushApplied); !ok || ev.CommitSeq != 1 || ev.Changes != 2 || ev.ActorID != "server" {
		t.Fatalf("event %+v", h.events[0])
	}
	if res, err := e.Push.ApplyServerCommit(ctx, c); err != nil || res.Status != ssp2.PushCached || len(h.commits) != 1 {
		t.Fatalf("replay = %+v, %v", res, err)
	}
	// A write the pipeline refuses (a baseVersion above the row's) rejects the whole commit.
	stale := push.ServerCommit{Partition: "p1", ActorID: "server", ClientID: "job", ClientCommitID: "b2",
		Operations: []ssp2.PushOperation{ssptest.Upsert("projects", "pa", e.Project("pa", "alice", "A2"), 9)}}
	_, err = e.Push.ApplyServerCommit(ctx, stale)
	var rej *push.RejectedError
	if !errors.As(err, &rej) || rej.OpIndex != 0 || syncerr.CodeOf(err) == "" {
		t.Fatalf("stale write = %v", err)
	}
	// An AfterAppend failure rolls everything back.
	boom := errors.New("advance refused")
	failing := push.ServerCommit{Partition: "p1", ActorID: "server", ClientID: "job", ClientCommitID: "b3",
		Operations:  []ssp2.PushOperation{ssptest.Upsert("projects", "pc", e.Project("pc", "carol", "C"), -1)},
		AfterAppend: func(context.Context, ports.PushTx, int64) error { return boom }}
	if _, err := e.Push.ApplyServerCommit(ctx, failing); !errors.Is(err, boom) {
		t.Fatalf("failing after append = %v", err)
	}
	if row, _ := e.Store.GetRow(ctx, "p1", "projects", "pc"); row != nil {
		t.Fatal("rolled-back commit left its row")
	}
	if b, _ := e.Store.LogBounds(ctx, "p1"); b.MaxSeq != 1 {
		t.Fatalf("log after a rollback: %+v", b)
	}
	// The client id belongs to the server actor now.
	other := push.ServerCommit{Partition: "p1", ActorID: "someone", ClientID: "job", ClientCommitID: "b4",
		Operations: []ssp2.PushOperation{ssptest.Upsert("projects", "pd", e.Project("pd", "dave", "D"), -1)}}
	if _, err := e.Push.ApplyServerCommit(ctx, other); syncerr.CodeOf(err) != syncerr.InvalidClientID {
		t.Fatalf("another actor's client id = %v", err)
	}
	if _, err := e.Push.ApplyServerCommit(ctx, push.ServerCommit{Partition: "p1"}); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("incomplete commit = %v", err)
	}
}

// TestServerCommitUnderAFence: a writer fence above the running version
// (SPEC §2.4) refuses a server commit's append with the storage code, not
// the client's sync.schema_not_ready, and nothing is stored.
func TestServerCommitUnderAFence(t *testing.T) {
	e := roundtest.New(t, nil)
	ctx := context.Background()
	if _, err := e.Store.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: "p1", Name: "next", SchemaVersion: e.Schema.Version + 1}, 1); err != nil {
		t.Fatal(err)
	}
	_, err := e.Push.ApplyServerCommit(ctx, push.ServerCommit{Partition: "p1", ActorID: "server", ClientID: "job", ClientCommitID: "b1",
		Operations: []ssp2.PushOperation{ssptest.Upsert("projects", "pa", e.Project("pa", "alice", "A"), -1)}})
	if syncerr.CodeOf(err) != syncerr.StorageWriterFenceRejected {
		t.Fatalf("server commit under the fence = %v, want %s", err, syncerr.StorageWriterFenceRejected)
	}
	if row, _ := e.Store.GetRow(ctx, "p1", "projects", "pa"); row != nil {
		t.Fatal("server commit landed past the writer fence")
	}
}

package contract

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/ports"
)

// testRequestHead: TouchPartitionHead is TouchPartition followed by the
// separate reads it stands for (serve gate, client record, log bounds,
// idempotency record), whatever the partition's state.
func testRequestHead(t *testing.T, h Harness) {
	e := open(t, h)
	hs, ok := e.s.(ports.RequestHeadStore)
	if !ok {
		t.Fatalf("%T does not read request heads", e.s)
	}
	q := ports.HeadQuery{Partition: "p1", ClientID: "c1", Running: v1, NowMs: 10, PushClientID: "c1", PushClientCommitID: "k1"}
	// agrees checks a head against the separate reads made right after it.
	agrees := func(step string, head ports.RequestHead) {
		t.Helper()
		epoch, ok, err := e.s.LogEpoch(e.ctx, "p1")
		must(t, err)
		if !ok || head.LogEpoch != epoch {
			t.Fatalf("%s: head epoch %q, registry %q (%v)", step, head.LogEpoch, epoch, ok)
		}
		parts, err := e.s.ListPartitions(e.ctx)
		must(t, err)
		for _, p := range parts {
			if p.Partition == "p1" && p.EpochRequired != head.EpochRequired {
				t.Fatalf("%s: head epoch required %v, registry %v", step, head.EpochRequired, p.EpochRequired)
			}
		}
		if head.GateRead {
			g, err := e.s.ReadServeGate(e.ctx, "p1", v1)
			must(t, err)
			if !reflect.DeepEqual(head.Gate, g) {
				t.Fatalf("%s: head gate %+v, read %+v", step, head.Gate, g)
			}
		}
		if !head.ClientRead || !head.BoundsRead || !head.PushRead {
			t.Fatalf("%s: asked-for reads missing: %+v", step, head)
		}
		rec, err := e.s.GetClient(e.ctx, "p1", "c1")
		must(t, err)
		if !reflect.DeepEqual(head.Client, rec) {
			t.Fatalf("%s: head client %+v, read %+v", step, head.Client, rec)
		}
		if b := e.bounds("p1"); head.Bounds != b {
			t.Fatalf("%s: head bounds %+v, read %+v", step, head.Bounds, b)
		}
		r, found, err := e.s.GetPushResult(e.ctx, "p1", "c1", "k1")
		must(t, err)
		if head.PushFound != found || !bytes.Equal(head.Push.Result, r.Result) || head.Push.ActorID != r.ActorID {
			t.Fatalf("%s: head push record %+v (%v), read %+v (%v)", step, head.Push, head.PushFound, r, found)
		}
	}

	// A partition's first request registers it.
	first, err := hs.TouchPartitionHead(e.ctx, q)
	must(t, err)
	if first.LogEpoch == "" {
		t.Fatal("first head: no epoch minted")
	}
	agrees("unregistered", first)

	// With a log, a client record and an idempotency record.
	e.commitTasks("p1", 11, []task{{id: "a", project: "p1", owner: "o"}, {id: "b", project: "p1", owner: "o"}}, nil)
	must(t, e.s.PutClient(e.ctx, ports.ClientRecord{Partition: "p1", ClientID: "c1", ActorID: "u", WireVersion: 3,
		Cursor: 1, Subscriptions: []byte(`[{"id":"s"}]`), UpdatedAtMs: 12}))
	must(t, e.push("p1", func(tx ports.PushTx) error {
		_, err := tx.PutPushResult(e.ctx, "c1", "k1", []byte(`{"status":"applied"}`))
		return err
	}))
	q.NowMs = 20
	full, err := hs.TouchPartitionHead(e.ctx, q)
	must(t, err)
	if full.LogEpoch != first.LogEpoch {
		t.Fatalf("a touch changed the epoch: %q → %q", first.LogEpoch, full.LogEpoch)
	}
	if !full.GateRead || full.Client == nil || !full.PushFound || full.Bounds.MaxSeq == 0 || full.EpochRequired {
		t.Fatalf("registered head incomplete: %+v", full)
	}
	agrees("registered", full)

	// Reads not asked for are not made; other clients' records are not read.
	none, err := hs.TouchPartitionHead(e.ctx, ports.HeadQuery{Partition: "p1", Running: v1, NowMs: 21})
	must(t, err)
	if none.ClientRead || none.PushRead || none.Client != nil || none.PushFound {
		t.Fatalf("head read what was not asked: %+v", none)
	}
	other, err := hs.TouchPartitionHead(e.ctx, ports.HeadQuery{Partition: "p1", ClientID: "c2", Running: v1, NowMs: 22,
		PushClientID: "c2", PushClientCommitID: "k1"})
	must(t, err)
	if other.Client != nil || other.PushFound {
		t.Fatalf("head of client c2 read c1's records: %+v", other)
	}

	// A pending checkpoint at the running version: the head either leaves
	// the gate to a separate read or holds the same gate.
	_, err = e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", v1), 23)
	must(t, err)
	q.NowMs = 24
	pending, err := hs.TouchPartitionHead(e.ctx, q)
	must(t, err)
	if pending.GateRead && len(pending.Gate.Pending) == 0 {
		t.Fatalf("head gate misses the pending checkpoint: %+v", pending.Gate)
	}
	agrees("pending checkpoint", pending)

	// A rotated epoch is what the next head reports.
	rotated, err := e.s.RotateLogEpoch(e.ctx, "p1")
	must(t, err)
	q.NowMs = 25
	after, err := hs.TouchPartitionHead(e.ctx, q)
	must(t, err)
	if after.LogEpoch != rotated || !after.EpochRequired {
		t.Fatalf("head after rotation: epoch %q required %v, want %q required", after.LogEpoch, after.EpochRequired, rotated)
	}
	agrees("rotated", after)
}

// testBoundsAndGate: ReadBoundsAndGate returns what LogBounds and
// ReadServeGate return, or leaves a pending gate to ReadServeGate.
func testBoundsAndGate(t *testing.T, h Harness) {
	e := open(t, h)
	bg, ok := e.s.(ports.BoundsGateReader)
	if !ok {
		t.Fatalf("%T does not read bounds and gate together", e.s)
	}
	check := func(step, partition string, wantComplete bool) {
		t.Helper()
		b, g, complete, err := bg.ReadBoundsAndGate(e.ctx, partition, v1)
		must(t, err)
		if b != e.bounds(partition) {
			t.Fatalf("%s: bounds %+v, LogBounds %+v", step, b, e.bounds(partition))
		}
		if wantComplete && !complete {
			t.Fatalf("%s: gate left to a separate read", step)
		}
		if complete {
			want, err := e.s.ReadServeGate(e.ctx, partition, v1)
			must(t, err)
			if !reflect.DeepEqual(g, want) {
				t.Fatalf("%s: gate %+v, ReadServeGate %+v", step, g, want)
			}
		}
	}
	check("unknown partition", "p1", true)
	_, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	e.commitTasks("p1", 2, []task{{id: "a", project: "p1", owner: "o"}}, nil)
	check("registered", "p1", true)
	_, err = e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", v1), 3)
	must(t, err)
	check("pending checkpoint", "p1", false)
}

package round_test

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	pullsvc "github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// countingStore counts the serve-gate reads on the read pool, apart and
// in request heads.
type countingStore struct {
	*memory.Store
	reads, headGates int
}

func (c *countingStore) TouchPartitionHead(ctx context.Context, q ports.HeadQuery) (ports.RequestHead, error) {
	h, err := c.Store.TouchPartitionHead(ctx, q)
	if err == nil && h.GateRead {
		c.headGates++
	}
	return h, err
}

func (c *countingStore) ReadServeGate(ctx context.Context, partition string, running int32) (checkpoint.ServeGate, error) {
	c.reads++
	return c.Store.ReadServeGate(ctx, partition, running)
}

// TestServeGatePushOnly: a push-only request reads the gate in its push
// transaction and for the read-verify, not at entry; a refusal still takes
// precedence over every answer given before the pushes.
func TestServeGatePushOnly(t *testing.T) {
	var cs *countingStore
	e := roundtest.New(t, func(o *roundtest.Options) {
		cs = &countingStore{Store: o.Store.(*memory.Store)}
		o.Store = cs
		o.MaxOperations = 2
	})
	if _, _, err := e.Do(e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1)))); err != nil {
		t.Fatal(err)
	}
	if cs.reads != 1 {
		t.Fatalf("a push-only request read the gate %d times on the read pool, want 1 (the read-verify)", cs.reads)
	}
	cs.reads, cs.headGates = 0, 0
	r := e.Req(ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", e.Project("p-2", "alice", "Two"), -1)))
	r.Pull, r.SubTable = true, "projects"
	_, _, err := e.Do(r) // this service has no pull: refused after the entry read
	if cs.reads+cs.headGates != 1 || syncerr.CodeOf(err) != syncerr.InternalError {
		t.Fatalf("a request with a pull read the gate %d times on the read pool (%d in its head) before its refusal (%v), want 1 (entry)",
			cs.reads+cs.headGates, cs.headGates, err)
	}

	if _, err := cs.DeclareCheckpoint(context.Background(), checkpoint.Declaration{Partition: "p1", Name: "proj", SchemaVersion: 2}, 1); err != nil {
		t.Fatal(err)
	}
	floor := e.Req(ssptest.Commit("k3", ssptest.Delete("projects", "a")))
	floor.SchemaVersion = 1
	badClient := e.Req(ssptest.Commit("k3", ssptest.Delete("projects", "a")))
	badClient.ClientID = `["remote-command","a","b"]`
	tooMany := e.Req(ssptest.Commit("k3", ssptest.Delete("projects", "a"), ssptest.Delete("projects", "b"), ssptest.Delete("projects", "c")))
	ok := e.Req(ssptest.Commit("k3", ssptest.Upsert("projects", "p-3", e.Project("p-3", "alice", "Three"), -1)))
	for name, r := range map[string]ssptest.Req{"schema floor": floor, "client id": badClient, "operation cap": tooMany, "push": ok} {
		_, _, err := e.Do(r)
		if syncerr.CodeOf(err) != syncerr.SchemaNotReady {
			t.Errorf("%s under an undeclared checkpoint: %v, want %s", name, err, syncerr.SchemaNotReady)
		}
	}
	if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-3"); row != nil {
		t.Fatal("write landed past the gate")
	}
}

// bumpingStore, once armed, answers every serve-gate read after the
// first spared ones with the stored schema version one past running: a
// newer process upgraded the partition while the request was served.
type bumpingStore struct {
	*memory.Store
	armed  bool
	spared int
	reads  int
}

func (b *bumpingStore) bump(g checkpoint.ServeGate, running int32) checkpoint.ServeGate {
	if !b.armed {
		return g
	}
	if b.reads++; b.reads > b.spared {
		g.StoredSchemaVersion = running + 1
	}
	return g
}

func (b *bumpingStore) TouchPartitionHead(ctx context.Context, q ports.HeadQuery) (ports.RequestHead, error) {
	h, err := b.Store.TouchPartitionHead(ctx, q)
	if err == nil && h.GateRead {
		h.Gate = b.bump(h.Gate, q.Running)
	}
	return h, err
}

func (b *bumpingStore) ReadServeGate(ctx context.Context, partition string, running int32) (checkpoint.ServeGate, error) {
	g, err := b.Store.ReadServeGate(ctx, partition, running)
	return b.bump(g, running), err
}

func (b *bumpingStore) ReadBoundsAndGate(ctx context.Context, partition string, running int32) (ports.LogBounds, checkpoint.ServeGate, bool, error) {
	bounds, g, complete, err := b.Store.ReadBoundsAndGate(ctx, partition, running)
	if complete {
		g = b.bump(g, running)
	}
	return bounds, g, complete, err
}

// The buffered read-verify (SPEC §2.4, 0.24): the gate is read again
// before the first byte, and a stored schema version that moved past the
// running one meanwhile refuses the answer with sync.schema_not_ready,
// though the gate was open at entry: for a pull that read after its
// entry read, and for a push answered from its idempotency record alone,
// which read no gate before the read-verify.
func TestReadVerifyRefusesASchemaBumpedMidRequest(t *testing.T) {
	var bs *bumpingStore
	e := roundtest.New(t, func(o *roundtest.Options) {
		bs = &bumpingStore{Store: o.Store.(*memory.Store)}
		o.Store = bs
		p, err := pullsvc.New(pullsvc.Options{Store: bs, Now: o.Now})
		if err != nil {
			t.Fatal(err)
		}
		o.Round.Pull = p
	})
	// A commit to catch up on: the pull reads its window after its head.
	push := e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1)))
	e.Must(push)
	pull, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{
		&ssp2.ReqHeader{ClientID: "c1", SchemaVersion: e.Schema.Version, LogEpoch: ssp2.Some(e.Epoch)},
		&ssp2.PullHeader{LimitCommits: 100, LimitSnapshotRows: 100, MaxSnapshotPages: 1, Accept: ssp2.AcceptInlineRows},
		&ssp2.Subscription{ID: "s1", Table: "projects", Scopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}}), Cursor: 0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		spared int // gate reads before the bump: the entry read's
	}{
		{"a pull", pull, 1},
		{"a replayed push", push.Encode(t), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs.armed, bs.spared, bs.reads = true, tc.spared, 0
			defer func() { bs.armed = false }()
			_, err := e.Round.Handle(context.Background(), e.ID, tc.body)
			if syncerr.CodeOf(err) != syncerr.SchemaNotReady {
				t.Fatalf("gate closed mid-request: %v, want %s (%d gate reads)", err, syncerr.SchemaNotReady, bs.reads)
			}
			if rec, _ := e.Store.GetClient(context.Background(), "p1", "c1"); rec != nil {
				t.Fatalf("the refused request recorded its client: %+v", rec)
			}
		})
	}
}

package round_test

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/domain/checkpoint"
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

package syncsvc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// lateNote remembers the stale epoch again the moment a push finds it
// stale, as a concurrent request whose head was read before the rotation
// and noted after it would.
type lateNote struct {
	*memory.Store
	svc   *Service
	stale string
	at    time.Time
}

func (l *lateNote) Push(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) error {
	err := l.Store.Push(ctx, partition, o, fn)
	if errors.Is(err, errHeadStale) {
		l.svc.heads.note(partition, l.stale, l.at)
	}
	return err
}

type allowEverything struct{}

func (allowEverything) ResolveScopes(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
	return scopes.Allowed{"owner": {"*"}, "project_id": {"*"}}, nil
}

// A request served again reads its head whatever is remembered by then
// (here the stale epoch, noted again as it was found stale): it is
// answered, with the reset, not failed.
func TestServedAgainReadsItsHead(t *testing.T) {
	ctx := context.Background()
	sch := ssptest.Schema(t)
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_700_000_000_000)
	ln := &lateNote{Store: st, at: now}
	svc, err := New(Options{Schema: func() *schema.Schema { return sch }, Store: ln, Resolver: allowEverything{},
		HeadReuse: time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ln.svc = svc
	id := ports.Identity{ActorID: "alice", Partition: "p1"}
	epoch, err := st.TouchPartition(ctx, "p1", 1)
	if err != nil {
		t.Fatal(err)
	}
	ln.stale = epoch
	svc.heads.note("p1", epoch, now)
	if _, err := st.RotateLogEpoch(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	project := ssptest.Sparse(t, sch.Table("projects"), ssptest.Cols{"id": rowcodec.String("a"), "owner": rowcodec.String("alice"),
		"name": rowcodec.String("a"), "locked": rowcodec.Bool(false)})
	req := ssptest.Req{ClientID: "c1", SchemaVersion: sch.Version, Epoch: epoch,
		Commits: []*ssp2.PushCommit{ssptest.Commit("k1", ssptest.Upsert("projects", "a", project, -1))}}
	resp, err := svc.Handle(ctx, id, req.Encode(t))
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	var h *ssp2.RespHeader
	for _, f := range resp.Frames {
		if x, ok := f.(*ssp2.RespHeader); ok {
			h = x
		}
	}
	if h == nil || !h.ResetRequired || h.LogEpoch == epoch {
		t.Fatalf("header %+v, want a reset at the rotated epoch", h)
	}
}

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

// retryAfterRotation runs a push's function once in a transaction that
// then rolls back (as a store retrying a transient failure does), rotates
// the epoch, and runs it again.
type retryAfterRotation struct {
	*memory.Store
	rotated bool
}

var errTransient = errors.New("transient")

func (r *retryAfterRotation) Push(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) error {
	if !r.rotated {
		r.rotated = true
		err := r.Store.Push(ctx, partition, o, func(tx ports.PushTx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errTransient
		})
		if !errors.Is(err, errTransient) {
			return err
		}
		if _, err := r.Store.RotateLogEpoch(ctx, partition); err != nil {
			return err
		}
	}
	return r.Store.Push(ctx, partition, o, fn)
}

// The remembered epoch is checked in every attempt until one commits: an
// attempt rolled back after its check does not vouch for the next.
func TestEveryAttemptChecksTheEpoch(t *testing.T) {
	ctx := context.Background()
	sch := ssptest.Schema(t)
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_700_000_000_000)
	svc, err := New(Options{Schema: func() *schema.Schema { return sch }, Store: &retryAfterRotation{Store: st}, Resolver: allowEverything{},
		HeadReuse: time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := st.TouchPartition(ctx, "p1", 1)
	if err != nil {
		t.Fatal(err)
	}
	svc.heads.note("p1", epoch, now)
	project := ssptest.Sparse(t, sch.Table("projects"), ssptest.Cols{"id": rowcodec.String("a"), "owner": rowcodec.String("alice"),
		"name": rowcodec.String("a"), "locked": rowcodec.Bool(false)})
	req := ssptest.Req{ClientID: "c1", SchemaVersion: sch.Version, Epoch: epoch,
		Commits: []*ssp2.PushCommit{ssptest.Commit("k1", ssptest.Upsert("projects", "a", project, -1))}}
	resp, err := svc.Handle(ctx, ports.Identity{ActorID: "alice", Partition: "p1"}, req.Encode(t))
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	if h, ok := resp.Frames[0].(*ssp2.RespHeader); !ok || !h.ResetRequired || h.LogEpoch == epoch {
		t.Fatalf("frames %+v, want a reset at the rotated epoch", resp.Frames)
	}
	if row, _ := st.GetRow(ctx, "p1", "projects", "a"); row != nil {
		t.Fatal("the commit was applied at a rotated epoch")
	}
}

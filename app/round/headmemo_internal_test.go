package round

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/push"
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
	if errors.Is(err, push.ErrStaleEpoch) {
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
	ln := &lateNote{}
	e := newHeadless(t, func(st *memory.Store) ports.Storage { ln.Store = st; return ln })
	ln.svc, ln.stale, ln.at = e.svc, e.epoch, e.now
	if _, err := e.st.RotateLogEpoch(context.Background(), "p1"); err != nil {
		t.Fatal(err)
	}
	e.pushWantsReset(t)
}

// headless is a Service reusing heads, over a pipeline, over a memory
// store (wrapped by wrap), with partition p1 touched and its head
// remembered.
type headless struct {
	svc   *Service
	st    *memory.Store
	sch   *schema.Schema
	epoch string
	now   time.Time
}

func newHeadless(t *testing.T, wrap func(*memory.Store) ports.Storage) *headless {
	t.Helper()
	e := &headless{st: memory.New(), sch: ssptest.Schema(t), now: time.UnixMilli(1_700_000_000_000)}
	t.Cleanup(func() { _ = e.st.Close() })
	ctx := context.Background()
	if err := e.st.EnsureSchema(ctx, e.sch, nil); err != nil {
		t.Fatal(err)
	}
	var err error
	schemaFn, now := func() *schema.Schema { return e.sch }, func() time.Time { return e.now }
	st := wrap(e.st)
	pipeline, err := push.New(push.Options{Schema: schemaFn, Store: st, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e.svc, err = New(Options{Schema: schemaFn, Store: st, Resolver: allowEverything{}, Push: pipeline,
		HeadReuse: time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if e.epoch, err = e.st.TouchPartition(ctx, "p1", 1); err != nil {
		t.Fatal(err)
	}
	e.svc.heads.note("p1", e.epoch, e.now)
	return e
}

// pushWantsReset pushes row a at the remembered epoch, rotated by then:
// the answer is a reset at the rotated epoch, and nothing is applied.
func (e *headless) pushWantsReset(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	project := ssptest.Sparse(t, e.sch.Table("projects"), ssptest.Cols{"id": rowcodec.String("a"), "owner": rowcodec.String("alice"),
		"name": rowcodec.String("a"), "locked": rowcodec.Bool(false)})
	req := ssptest.Req{ClientID: "c1", SchemaVersion: e.sch.Version, Epoch: e.epoch,
		Commits: []*ssp2.PushCommit{ssptest.Commit("k1", ssptest.Upsert("projects", "a", project, -1))}}
	resp, err := e.svc.Handle(ctx, ports.Identity{ActorID: "alice", Partition: "p1"}, req.Encode(t))
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	if h, ok := resp.Frames[0].(*ssp2.RespHeader); !ok || !h.ResetRequired || h.LogEpoch == e.epoch {
		t.Fatalf("frames %+v, want a reset at the rotated epoch", resp.Frames)
	}
	if row, _ := e.st.GetRow(ctx, "p1", "projects", "a"); row != nil {
		t.Fatal("the commit was applied at a rotated epoch")
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
	e := newHeadless(t, func(st *memory.Store) ports.Storage { return &retryAfterRotation{Store: st} })
	e.pushWantsReset(t)
}

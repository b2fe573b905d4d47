package sim

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/auth/granttable"
	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/adapters/segments/imagebuilder"
	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/app/retention"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/app/segments"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// partition is the one partition of a run.
const partition = "sim"

// server is the simulated syncd: the use cases the real server assembles
// (round, push, pull, segments) behind the public routes, over the run's
// storage with the fault decorator, on the virtual clock, without fx,
// sockets or background jobs: nothing runs unless a request or a step
// runs it.
type server struct {
	r       *runner
	sch     *schema.Schema
	clock   *clock.Virtual
	grants  *granttable.Table
	segs    *memseg.Store
	images  ports.ImageBuilder
	inner   ports.Storage // the open store
	store   ports.Storage // inner behind the fault decorator
	handler http.Handler
	pruner  *retention.Pruner
}

func newServer(ctx context.Context, r *runner) (*server, error) {
	s := &server{r: r, sch: r.sch, clock: r.clock, grants: granttable.NewTable(), segs: memseg.New()}
	if r.o.Images {
		ib, err := imagebuilder.New(imagebuilder.Options{Dir: r.o.Dir})
		if err != nil {
			return nil, err
		}
		s.images = ib
	}
	st, err := r.engine.Open(ctx, EngineOptions{Now: s.clock.Now, NewEpoch: r.mintEpoch})
	if err != nil {
		return nil, err
	}
	return s, s.open(ctx, st)
}

// open assembles the services over a freshly opened store.
func (s *server) open(ctx context.Context, st ports.Storage) error {
	if err := st.EnsureSchema(ctx, s.sch, nil); err != nil {
		_ = st.Close()
		return fmt.Errorf("ensure schema: %w", err)
	}
	fs, err := storeFor(st, s.r)
	if err != nil {
		_ = st.Close()
		return err
	}
	s.inner, s.store = st, fs
	log := zap.NewNop()
	sch := func() *schema.Schema { return s.sch }
	pl, err := pull.New(pull.Options{
		Store: fs, Segments: s.segs, Images: s.images,
		// Small pages go by reference, so bootstraps also download.
		InlineMaxBytes: 96,
		CatchUpChanges: catchUpChanges,
		Now:            s.clock.Now, Log: log,
	})
	if err != nil {
		return err
	}
	pp, err := push.New(push.Options{
		Schema: sch, Store: fs,
		Mergers:   []ports.CRDTMerger{setMerger{}},
		Listeners: []ports.CommitListener{noticeListener{s.r}},
		Now:       s.clock.Now, Log: log,
	})
	if err != nil {
		return err
	}
	sv, err := round.New(round.Options{
		Schema: sch, Store: fs, Resolver: s.grants, Push: pp, Pull: pl,
		HeadReuse: sqlstore.DefaultTouchInterval,
		Now:       s.clock.Now, Log: log,
	})
	if err != nil {
		return err
	}
	sg, err := segments.New(segments.Options{Segments: s.segs, Storage: fs, Resolver: s.grants, Schema: sch, Now: s.clock.Now, Log: log})
	if err != nil {
		return err
	}
	t, err := httpapi.NewTransport(httpapi.TransportOptions{})
	if err != nil {
		return err
	}
	auth := granttable.Authenticator{Partition: partition}
	s.handler, err = httpapi.New(httpapi.Options{
		Handlers: map[httpapi.Route]http.Handler{
			httpapi.RouteSync:    t.SyncEndpoint(auth, t.SyncServe(sv, log)),
			httpapi.RouteSegment: t.SegmentEndpoint(auth, sg, log),
		},
		Logger: log, Now: s.clock.Now,
	})
	if err != nil {
		return err
	}
	// Retention prunes the inner store: its pass is the simulation's, not
	// a request's, and takes no faults.
	s.pruner, err = retention.New(retention.Options{Store: st, Policy: retention.ToActiveFloors(activeWindow), Unfloored: true, Now: s.clock.Now})
	return err
}

// restart closes the store and opens the same database again, with new
// services: what a crashed process's successor finds.
func (s *server) restart(ctx context.Context) error {
	_ = s.inner.Close()
	st, err := s.r.engine.Reopen(ctx)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	return s.open(ctx, st)
}

func (s *server) close() error {
	if s.inner == nil {
		return nil
	}
	return s.inner.Close()
}

// noticeListener is the server's commit listener (the realtime relay's
// place): every notice is queued for the runner to deliver, late,
// reordered or never.
type noticeListener struct{ r *runner }

func (l noticeListener) CommitApplied(_ context.Context, _ string, c commit.Commit) {
	l.r.notice(c.Seq, c.ClientID, c.ClientCommitID, len(c.Changes))
}

// Simulation constants: the active window of the tests' retention and the
// far-behind catch-up threshold.
const (
	activeWindow   = 10 * time.Minute
	catchUpChanges = 12
)

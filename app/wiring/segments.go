package wiring

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/adapters/segments/fsseg"
	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/adapters/segments/sqlseg"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/segments"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/ports"
)

// SegmentsModule provides the segment store (--segment-store), the native
// signed-URL minter (--signed-url-key-file, --public-url) as the pull's
// URL signer, and
// serves GET <mount>/segments/{id}; it sweeps expired segments every
// --segment-sweep-interval. Without a ports.Storage in the graph it
// provides nothing and the route keeps answering sync.not_found.
//
// A host replaces the store with fx.Decorate:
//
//	fx.Decorate(func(ports.SegmentStore) ports.SegmentStore { return myStore })
var SegmentsModule = fx.Module("syncd.segments",
	fx.Provide(
		NewSegmentStore,
		NewSegmentSigner,
		newSegmentURLSigner,
		NewSegmentService,
		fx.Annotate(newSegmentRoutes, fx.ResultTags(`group:"syncd.routes,flatten"`)),
	),
	fx.Invoke(scheduleSegmentSweep),
)

// SegmentStoreParams are the inputs of the segment store.
type SegmentStoreParams struct {
	fx.In
	Config config.Config
	Log    *zap.Logger
	Store  ports.Storage `optional:"true"`
}

// dbHandles is what an SQL storage engine exposes for side stores
// (adapters/storage/sqlstore.Store).
type dbHandles interface {
	DB() *bun.DB
	ReadDB() *bun.DB
}

// NewSegmentStore opens the configured segment store; nil without storage.
// --segment-store db needs an SQL engine; over any other storage (a host's
// own, the in-memory one) segments are kept in process memory.
func NewSegmentStore(lc fx.Lifecycle, p SegmentStoreParams) (ports.SegmentStore, error) {
	if p.Store == nil {
		return nil, nil
	}
	switch p.Config.Segments.Store {
	case config.SegmentStoreFS:
		s, err := fsseg.Open(fsseg.Options{Dir: p.Config.Segments.Dir})
		if err != nil {
			return nil, err
		}
		return s, nil
	default:
		h, ok := p.Store.(dbHandles)
		if !ok {
			p.Log.Warn("the storage is not an SQL engine: bootstrap segments are kept in process memory")
			return memseg.New(), nil
		}
		var s *sqlseg.Store
		// The engine opens lazily during readiness on some setups; create
		// the tables at start, before the sync API serves.
		lc.Append(fx.Hook{OnStart: func(ctx context.Context) error {
			var err error
			s, err = sqlseg.Open(ctx, sqlseg.Options{DB: h.DB(), ReadDB: h.ReadDB()})
			return err
		}})
		return platform.NewLazySegments(func() ports.SegmentStore { return s }), nil
	}
}

// NewSegmentSigner reads --signed-url-key-file (one key per line, the
// first signing, every one verifying); nil when unset.
func NewSegmentSigner(cfg config.Config) (*signedurl.Signer, error) {
	path := cfg.Segments.SignedURLKeyFile
	if path == "" {
		return nil, nil
	}
	keys, err := platform.ReadKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("--signed-url-key-file: %w", err)
	}
	s, err := signedurl.NewSigner(keys...)
	if err != nil {
		return nil, fmt.Errorf("--signed-url-key-file %s: %w", path, err)
	}
	return s, nil
}

// newSegmentURLSigner mints the pull's native signed URLs under
// --public-url; none when signed URLs are off (no key file).
func newSegmentURLSigner(cfg config.Config, s *signedurl.Signer) ports.SegmentURLSigner {
	if s == nil {
		return nil
	}
	return httpapi.NewSegmentURLs(s, cfg.Segments.PublicURL, cfg.Segments.SignedURLTTL)
}

// SegmentServiceParams are the inputs of the segment download use case.
type SegmentServiceParams struct {
	fx.In
	Log       *zap.Logger
	Clock     ports.Clock
	Readiness *platform.Readiness
	Resolver  ports.ScopeResolver
	Store     ports.Storage      `optional:"true"`
	Segments  ports.SegmentStore `optional:"true"`
	Signer    *signedurl.Signer  `optional:"true"`
	Events    ports.EventSink    `optional:"true"`
}

// NewSegmentService builds the download use case; nil without storage.
func NewSegmentService(p SegmentServiceParams) (*segments.Service, error) {
	if p.Store == nil || p.Segments == nil {
		return nil, nil
	}
	return segments.New(segments.Options{
		Segments: p.Segments,
		Storage:  p.Store,
		Resolver: p.Resolver,
		Schema:   p.Readiness.Schema,
		Signer:   p.Signer,
		Events:   p.Events,
		Log:      p.Log.Named("segments"),
		Now:      p.Clock.Now,
	})
}

type segmentRouteParams struct {
	fx.In
	Transport *httpapi.Transport
	Auth      ports.Authenticator
	Service   *segments.Service `optional:"true"`
	Log       *zap.Logger
}

func newSegmentRoutes(p segmentRouteParams) ([]platform.RouteHandler, error) {
	if p.Service == nil {
		return nil, nil
	}
	if p.Auth == nil {
		return nil, errNoAuthenticator
	}
	return []platform.RouteHandler{{
		Route:   httpapi.RouteSegment,
		Handler: p.Transport.SegmentEndpoint(p.Auth, p.Service, p.Log.Named("segments")),
	}}, nil
}

// scheduleSegmentSweep forgets expired segments every
// --segment-sweep-interval, each pass bounded by the interval; off
// without a segment store or with --segment-sweep-interval 0.
func scheduleSegmentSweep(lc fx.Lifecycle, sched *periodic.Scheduler, cfg config.Config, m *platform.Metrics, log *zap.Logger, clk platform.Clock, s ports.SegmentStore) error {
	if s == nil || cfg.Segments.SweepInterval <= 0 {
		return nil
	}
	sm, err := segments.NewSweepMetrics(m.Registry)
	if err != nil {
		return err
	}
	log = log.Named("segments")
	sw, err := segments.NewSweeper(s, clk.Now, sm, log)
	if err != nil {
		return err
	}
	schedule(lc, sched, periodic.Job{Name: "segment sweep", Interval: cfg.Segments.SweepInterval, Timeout: cfg.Segments.SweepInterval, Pass: sw.Pass, Log: log})
	return nil
}

package wiring

import (
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/crdt/yjsdoc"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/ports"
)

// Value groups of host hooks. Provide into them with the helpers below.
const (
	GroupRowValidators   = "syncd.row_validators"
	GroupCRDTMergers     = "syncd.crdt_mergers"
	GroupCommitListeners = "syncd.commit_listeners"
)

// RoundModule serves POST <mount>/sync: the sync use case over the
// storage in the graph, with the ports.Authenticator and
// ports.ScopeResolver of the graph (AuthModule builds them from --auth)
// and the host hooks provided into the groups below. Without a
// ports.Storage in the graph the route keeps answering
// sync.not_found.
//
// A host that embeds the server replaces the configured identity with its
// own implementations (see examples/embed):
//
//	fx.Decorate(func(ports.Authenticator) ports.Authenticator { return myAuth })
//	fx.Decorate(func(ports.ScopeResolver) ports.ScopeResolver { return myResolver })
var RoundModule = fx.Module("syncd.round",
	fx.Provide(
		NewSyncTransport,
		NewSyncService,
		fx.Annotate(newSyncRoutes, fx.ResultTags(`group:"syncd.routes,flatten"`)),
	),
)

// BuiltinMergers are the CRDT mergers the server ships: yjs-doc, the one
// crdtType SPEC §5.10.1 defines.
func BuiltinMergers() []ports.CRDTMerger {
	return []ports.CRDTMerger{yjsdoc.New(yjsdoc.Options{})}
}

// withBuiltinMergers adds the built-in mergers a host did not replace.
func withBuiltinMergers(host []ports.CRDTMerger) []ports.CRDTMerger {
	out := append([]ports.CRDTMerger(nil), host...)
	for _, b := range BuiltinMergers() {
		replaced := false
		for _, h := range host {
			replaced = replaced || (h != nil && h.Type() == b.Type())
		}
		if !replaced {
			out = append(out, b)
		}
	}
	return out
}

// NewSyncTransport builds the body and compression handling of /sync,
// with the in-flight bounds and the body read deadline of cfg.HTTP; the
// blob routes share it (the same in-flight budget, the same deadline and
// --blob-min-transfer-rate).
func NewSyncTransport(cfg config.Config, clock platform.Clock) (*httpapi.Transport, error) {
	lim, err := httpapi.NewLimiter(httpapi.LimiterOptions{
		MaxRequests:  cfg.HTTP.MaxInflightRequests,
		MaxBodyBytes: cfg.HTTP.MaxInflightBodyBytes,
	})
	if err != nil {
		return nil, err
	}
	timeout := cfg.HTTP.BodyReadTimeout
	if timeout == 0 {
		timeout = -1 // the transport's "no bound"
	}
	return httpapi.NewTransport(httpapi.TransportOptions{
		MaxBodyBytes:        cfg.Round.MaxBodyBytes,
		MaxDecodedBodyBytes: cfg.Round.MaxDecodedBodyBytes,
		Limits:              cfg.Limits.Domain(),
		BodyReadTimeout:     timeout,
		BlobMinRate:         cfg.Blobs.MinTransferRate,
		Limiter:             lim,
		Now:                 clock.Now,
	})
}

// SyncServiceParams are the inputs of the sync use case.
type SyncServiceParams struct {
	fx.In
	Config          config.Config
	Log             *zap.Logger
	Clock           ports.Clock
	Readiness       *platform.Readiness
	Resolver        ports.ScopeResolver
	Store           ports.Storage            `optional:"true"`
	Declarations    []checkpoint.Declaration `optional:"true"`
	RowValidators   []ports.RowValidator     `group:"syncd.row_validators"`
	Mergers         []ports.CRDTMerger       `group:"syncd.crdt_mergers"`
	CommitValidator ports.CommitValidator    `optional:"true"`
	ReactionPlanner ports.ReactionPlanner    `optional:"true"`
	Blobs           ports.BlobChecker        `optional:"true"`
	Listeners       []ports.CommitListener   `group:"syncd.commit_listeners"`
	Metrics         *platform.Metrics        `optional:"true"`
	Pull            *pull.Service            `optional:"true"`
	Leases          *leases.Service          `optional:"true"`
	Events          ports.EventSink          `optional:"true"`
}

// NewSyncService builds the sync use case, a round over its push
// pipeline; nil without storage.
func NewSyncService(p SyncServiceParams) (*round.Service, *push.Pipeline, error) {
	if p.Store == nil {
		return nil, nil, nil
	}
	if p.Config.Round.MinWireVersion < int(round.LowestMinWireVersion) && p.Config.Round.MinWireVersion != 0 {
		return nil, nil, fmt.Errorf("--min-wire-version %d: want 2 or 3", p.Config.Round.MinWireVersion)
	}
	if p.Config.Round.MinWireVersion < int(round.MaxWireVersion) && p.Config.Round.MinWireVersion != 0 {
		p.Log.Warn("admitting wire-2 clients: their pushes get the wire-2 rules where wire 2 and wire 3 differ (scope columns, baseVersion ahead, upsert over a tombstone), the wire-3 column rules elsewhere",
			zap.Int("min_wire_version", p.Config.Round.MinWireVersion))
	}
	var pm *push.Metrics
	if p.Metrics != nil && p.Metrics.Registry != nil {
		var err error
		if pm, err = push.NewMetrics(p.Metrics.Registry); err != nil {
			return nil, nil, err
		}
	}
	pipeline, err := push.New(push.Options{
		Metrics:         pm,
		Schema:          p.Readiness.Schema,
		Store:           p.Store,
		Declarations:    p.Declarations,
		RowValidators:   p.RowValidators,
		CommitValidator: p.CommitValidator,
		ReactionPlanner: p.ReactionPlanner,
		Mergers:         withBuiltinMergers(p.Mergers),
		Blobs:           p.Blobs,
		Listeners:       p.Listeners,
		Events:          p.Events,
		MaxOperations:   p.Config.Round.MaxOperations,
		Limits:          p.Config.Limits.Domain(),
		Log:             p.Log.Named("sync"),
		Now:             p.Clock.Now,
	})
	if err != nil {
		return nil, nil, err
	}
	svc, err := round.New(round.Options{
		Schema:         p.Readiness.Schema,
		Store:          p.Store,
		Resolver:       p.Resolver,
		Push:           pipeline,
		Declarations:   p.Declarations,
		Pull:           p.Pull,
		Leases:         p.Leases,
		Events:         p.Events,
		MinWireVersion: uint16(p.Config.Round.MinWireVersion),
		MaxOperations:  p.Config.Round.MaxOperations,
		Limits:         p.Config.Limits.Domain(),
		HeadReuse:      touchInterval,
		Log:            p.Log.Named("sync"),
		Now:            p.Clock.Now,
	})
	if err != nil {
		return nil, nil, err
	}
	return svc, pipeline, nil
}

type syncRouteParams struct {
	fx.In
	Transport *httpapi.Transport
	Auth      ports.Authenticator
	Service   *round.Service `optional:"true"`
	Log       *zap.Logger
}

func newSyncRoutes(p syncRouteParams) ([]platform.RouteHandler, error) {
	if p.Service == nil {
		return nil, nil
	}
	if p.Auth == nil {
		return nil, errNoAuthenticator
	}
	serve := p.Transport.SyncServe(p.Service, p.Log.Named("sync"))
	return []platform.RouteHandler{{Route: httpapi.RouteSync, Handler: p.Transport.SyncEndpoint(p.Auth, serve)}}, nil
}

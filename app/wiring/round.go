package wiring

import (
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"

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

// RoundModule serves POST <mount>/sync: one SSP2 round over the storage
// in the graph and PushModule's pipeline, with the ports.Authenticator
// and ports.ScopeResolver of the graph (AuthModule builds them from
// --auth). Without a
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
		NewSchemaClients,
		NewRoundService,
		fx.Annotate(newSyncRoutes, fx.ResultTags(`group:"syncd.routes,flatten"`)),
	),
)

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

// RoundServiceParams are the inputs of the round use case.
type RoundServiceParams struct {
	fx.In
	Config       config.Config
	Log          *zap.Logger
	Clock        ports.Clock
	Readiness    *platform.Readiness
	Resolver     ports.ScopeResolver
	Store        ports.Storage            `optional:"true"`
	Push         *push.Pipeline           `optional:"true"`
	Declarations []checkpoint.Declaration `optional:"true"`
	Pull         *pull.Service            `optional:"true"`
	Leases       *leases.Service          `optional:"true"`
	Events       ports.EventSink          `optional:"true"`
	Clients      *round.SchemaClients     `optional:"true"`
}

// NewSchemaClients registers syncd_clients_by_schema_version, which the
// rounds and the realtime sockets feed.
func NewSchemaClients(m *platform.Metrics, r *platform.Readiness, clock ports.Clock) (*round.SchemaClients, error) {
	return round.NewSchemaClients(m.Registry, round.SchemaClientsOptions{Served: r.Window, Now: clock.Now})
}

// NewRoundService builds the round use case over the push pipeline; nil
// without storage.
func NewRoundService(p RoundServiceParams) (*round.Service, error) {
	if p.Store == nil || p.Push == nil {
		return nil, nil
	}
	if p.Config.Round.MinWireVersion < int(round.LowestMinWireVersion) && p.Config.Round.MinWireVersion != 0 {
		return nil, fmt.Errorf("--min-wire-version %d: want 1, 2 or 3", p.Config.Round.MinWireVersion)
	}
	if p.Config.Round.MinWireVersion < int(round.MaxWireVersion) && p.Config.Round.MinWireVersion != 0 {
		p.Log.Warn("admitting wire-2 clients: their pushes get the wire-2 rules where wire 2 and wire 3 differ (scope columns, baseVersion ahead, upsert over a tombstone), the wire-3 column rules elsewhere",
			zap.Int("min_wire_version", p.Config.Round.MinWireVersion))
	}
	if p.Config.Round.MinWireVersion == 1 {
		p.Log.Warn("admitting wire-1 clients: they send no log epoch, get the wire-2 write rules, and are refused with sync.client_wire_unsupported in a partition once its epoch was rotated",
			zap.Int("min_wire_version", p.Config.Round.MinWireVersion))
	}
	return round.New(round.Options{
		Clients:        p.Clients,
		Schema:         p.Readiness.Schema,
		Window:         p.Readiness.Window,
		Store:          p.Store,
		Resolver:       p.Resolver,
		Push:           p.Push,
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

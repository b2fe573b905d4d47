package wiring

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/app/sockets"
	"github.com/syncd-dev/syncd/ports"
)

// RealtimeModule serves GET <mount>/realtime (SPEC §8): the realtime hub
// over the storage and the sync use case in the graph. Applied commits are
// announced through the ports.Fanout of the graph when there is one (every
// node hears them), to this node's sessions otherwise. On stop, after the
// lame-duck delay, the sockets are closed with 1001.
var RealtimeModule = fx.Module("syncd.realtime",
	fx.Provide(
		provideRealtimeMetrics,
		newRealtimeRelay,
		fx.Annotate(func(r *realtime.Relay) ports.CommitListener { return r }, fx.ResultTags(`group:"syncd.commit_listeners"`)),
		NewRealtimeHub,
		newScopeRefresher,
		fx.Annotate(newRealtimeRoutes, fx.ResultTags(`group:"syncd.routes,flatten"`)),
	),
	fx.Invoke(registerRealtime),
)

type realtimeRelayParams struct {
	fx.In
	Fanout  ports.Fanout `optional:"true"`
	Metrics *realtime.Counters
	Log     *zap.Logger
}

func newRealtimeRelay(p realtimeRelayParams) *realtime.Relay {
	return &realtime.Relay{Fanout: p.Fanout, Metrics: p.Metrics, Log: p.Log.Named("realtime")}
}

type realtimeMetricsParams struct {
	fx.In
	Metrics *platform.Metrics `optional:"true"`
}

func provideRealtimeMetrics(p realtimeMetricsParams) (*realtime.Counters, error) {
	if p.Metrics == nil {
		return realtime.NewCounters(nil)
	}
	return realtime.NewCounters(p.Metrics.Registry)
}

// RealtimeHubParams are the inputs of the realtime hub.
type RealtimeHubParams struct {
	fx.In
	Config    config.Config
	Log       *zap.Logger
	Clock     platform.Clock
	Readiness *platform.Readiness
	Resolver  ports.ScopeResolver
	Store     ports.Storage   `optional:"true"`
	Service   *round.Service  `optional:"true"`
	Leases    *leases.Service `optional:"true"`
	Metrics   *realtime.Counters
	Fanout    ports.Fanout         `optional:"true"`
	Tracer    trace.TracerProvider `optional:"true"`
	Events    ports.EventSink      `optional:"true"`
	Transport *httpapi.Transport   `optional:"true"`
	Sockets   *sockets.Slots
	Clients   *round.SchemaClients `optional:"true"`
}

// NewRealtimeHub builds the hub; nil without storage or sync use case.
func NewRealtimeHub(p RealtimeHubParams) (*realtime.Hub, error) {
	if p.Store == nil || p.Service == nil {
		return nil, nil
	}
	m := p.Metrics
	rc := p.Config.Realtime
	var inflight ports.Inflight
	if p.Transport != nil {
		inflight = p.Transport.Inflight()
	}
	return realtime.New(realtime.Options{
		Store: p.Store, Schema: p.Readiness.Schema, Window: p.Readiness.Window, Clients: p.Clients, Resolver: p.Resolver, Leases: p.Leases, Rounds: p.Service,
		MaxDeltaBytes: rc.MaxDeltaBytes, MaxRequestBytes: p.Config.Round.MaxDecodedBodyBytes,
		RoundTimeout: p.Config.HTTP.BodyReadTimeout, Inflight: inflight, SendBudgetBytes: rc.SendBudgetBytes,
		PresenceRate: rc.PresenceRate, PresenceBurst: rc.PresenceBurst,
		Heartbeat: rc.Heartbeat, IdleTimeout: rc.IdleTimeout, WriteTimeout: rc.WriteTimeout,
		SendQueueBytes: rc.SendQueueBytes, Sockets: p.Sockets,
		MaxPresenceBytes: rc.MaxPresenceBytes, PresenceLease: rc.PresenceLease, Fanout: p.Fanout,
		Now: p.Clock.Now, Sleep: p.Clock.Sleep, Metrics: m, Events: p.Events, Log: p.Log.Named("realtime"), Tracer: platform.TracingOn(p.Tracer),
	})
}

// newScopeRefresher is the hub as the hosts' ports.ScopeRefresher (a
// graph without realtime refreshes nothing).
func newScopeRefresher(h *realtime.Hub) ports.ScopeRefresher {
	if h == nil {
		return realtime.NoSessions{}
	}
	return h
}

type realtimeRouteParams struct {
	fx.In
	Config    config.Config
	Auth      ports.Authenticator
	Hub       *realtime.Hub `optional:"true"`
	Transport *httpapi.Transport
	Clock     platform.Clock
	Log       *zap.Logger
}

func newRealtimeRoutes(p realtimeRouteParams) ([]platform.RouteHandler, error) {
	if p.Hub == nil {
		return nil, nil
	}
	if p.Auth == nil {
		return nil, errNoAuthenticator
	}
	o := socketMessageOptions(p.Config, p.Transport, p.Clock)
	// A round may come as one binary message (tag byte and request); text
	// messages are control and presence, bounded by the presence cap.
	o.MaxMessageBytes = p.Config.Round.MaxDecodedBodyBytes + 1
	o.MaxTextBytes = p.Config.Realtime.MaxControlBytes()
	o.Log = p.Log.Named("realtime")
	h := httpapi.RealtimeEndpoint(p.Auth, o, p.Hub.Admit)
	return []platform.RouteHandler{{Route: httpapi.RouteRealtime, Handler: h}}, nil
}

// socketMessageOptions are the bounds every socket's client messages share:
// the body read timeout once a message has begun, and the node's
// in-flight memory budget for the bytes it holds.
func socketMessageOptions(cfg config.Config, t *httpapi.Transport, clock platform.Clock) httpapi.RealtimeOptions {
	return httpapi.RealtimeOptions{
		Limits:         cfg.Limits.Domain(),
		MessageTimeout: cfg.HTTP.BodyReadTimeout,
		Inflight:       t.Inflight(),
		Sleep:          clock.Sleep,
		OriginPatterns: platform.CORSOptions(cfg).OriginPatterns(),
	}
}

type realtimeRunParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Hub       *realtime.Hub `optional:"true"`
	Relay     *realtime.Relay
	Fanout    ports.Fanout `optional:"true"`
	Log       *zap.Logger
}

// registerRealtime connects the hub to the fanout (or to this node's
// commits) and drains it on stop. Its stop hook runs after RegisterDrain's
// lame-duck delay (hooks stop in reverse order), before the listeners
// close: http.Server.Shutdown does not close hijacked sockets.
func registerRealtime(p realtimeRunParams) {
	if p.Hub == nil {
		return
	}
	var stop func()
	maintain, endMaintain := context.WithCancel(context.Background())
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if p.Fanout == nil {
				p.Relay.SetHandler(p.Hub)
				return nil
			}
			s, err := p.Fanout.Listen(context.Background(), p.Hub)
			stop = s
			if err == nil {
				go p.Hub.Maintain(maintain)
			}
			return err
		},
		OnStop: func(ctx context.Context) error {
			err := p.Hub.Drain(ctx)
			endMaintain()
			if stop != nil {
				stop()
			}
			if err != nil {
				p.Log.Warn("realtime sockets still open at the stop deadline", zap.Error(err))
			}
			return nil
		},
	})
}

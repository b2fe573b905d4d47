package wiring

import (
	"context"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/operations"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/app/sockets"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// Value groups of registered remote operations a host provides with
// ProvideRemoteQuery and ProvideRemoteCommand.
const (
	GroupRemoteQueries  = "syncd.remote_queries"
	GroupRemoteCommands = "syncd.remote_commands"
)

// OperationsModule serves POST <mount>/operations (REMOTE.md): the
// registered queries of --operations and those a host provides with
// ProvideRemoteQuery, compiled against the running schema while the graph
// is built (a query that does not compile stops the start), and the
// commands a host provides with ProvideRemoteCommand, committed through
// the sync use case's push pipeline. Without a ports.Storage in the graph
// the route answers sync.not_found.
var OperationsModule = fx.Module("syncd.operations",
	fx.Provide(
		NewOperationsRegistry,
		newTxQueries,
		NewOperationsService,
		NewWatchHub,
		fx.Annotate(newOperationsRoutes, fx.ResultTags(`group:"syncd.routes,flatten"`)),
	),
	fx.Invoke(registerWatchHub),
)

// OperationsRegistryParams are the inputs of the registry.
type OperationsRegistryParams struct {
	fx.In
	Config   config.Config
	Schema   *schema.Schema
	Queries  []operations.Query   `group:"syncd.remote_queries"`
	Commands []operations.Command `group:"syncd.remote_commands"`
}

// NewOperationsRegistry compiles the file's queries and the host's.
func NewOperationsRegistry(p OperationsRegistryParams) (*operations.Registry, error) {
	qs := append([]operations.Query(nil), p.Queries...)
	if p.Config.Operations != "" {
		file, err := operations.LoadQueryFile(p.Config.Operations, p.Schema)
		if err != nil {
			return nil, err
		}
		qs = append(qs, file...)
	}
	return operations.NewRegistry(p.Schema, qs, p.Commands)
}

// newTxQueries offers the registry to validators as the transaction's
// queryAuthoritative: registered queries by id or descriptor name.
func newTxQueries(r *operations.Registry) ports.TxQueries { return r }

// OperationsServiceParams are the inputs of the operations use case.
type OperationsServiceParams struct {
	fx.In
	Config       config.Config
	Log          *zap.Logger
	Clock        ports.Clock
	Schema       *schema.Schema
	Resolver     ports.ScopeResolver
	Registry     *operations.Registry
	Store        ports.Storage            `optional:"true"`
	Declarations []checkpoint.Declaration `optional:"true"`
	Sync         *push.Pipeline           `optional:"true"`
}

// NewOperationsService builds the use case; nil without storage. A store
// that runs no authoritative queries answers them
// operation.storage_unsupported.
func NewOperationsService(p OperationsServiceParams) (*operations.Service, error) {
	if p.Store == nil {
		return nil, nil
	}
	querier, _ := p.Store.(ports.AuthoritativeQuerier)
	var pusher operations.CommandPusher
	if p.Sync != nil {
		pusher = p.Sync
	}
	log := p.Log.Named("operations")
	log.Info("remote operations registered", zap.Int("queries", p.Registry.Len()), zap.Strings("descriptors", p.Registry.Descriptors()))
	return operations.New(operations.Options{
		Store:        p.Store,
		Querier:      querier,
		Resolver:     p.Resolver,
		Schema:       p.Schema,
		Registry:     p.Registry,
		Pusher:       pusher,
		Limits:       p.Config.Limits.Domain(),
		Declarations: p.Declarations,
		Now:          p.Clock.Now,
		Log:          log,
	})
}

// WatchHubParams are the inputs of the live watch hub.
type WatchHubParams struct {
	fx.In
	Config  config.Config
	Log     *zap.Logger
	Sockets *sockets.Slots
	Service *operations.Service `optional:"true"`
	Store   ports.Storage       `optional:"true"`
}

// NewWatchHub builds the live query watches' hub; nil without the use case.
func NewWatchHub(p WatchHubParams) (*operations.WatchHub, error) {
	if p.Service == nil || p.Store == nil {
		return nil, nil
	}
	w := p.Config.Watches
	return p.Service.NewWatchHub(operations.WatchOptions{Log: p.Store, MaxWatches: w.MaxPerSocket, MaxWatchesPerActor: w.MaxPerActor,
		Evaluations: w.Evaluations, Sockets: p.Sockets, Logger: p.Log.Named("operations")})
}

type watchRunParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Hub       *operations.WatchHub `optional:"true"`
	Fanout    ports.Fanout         `optional:"true"`
}

// registerWatchHub makes the hub hear every node's commits through the
// fanout and closes its sockets on stop (after the lame-duck delay, like
// the realtime channel's). Without a fanout watches get their first
// snapshot only.
func registerWatchHub(p watchRunParams) {
	if p.Hub == nil {
		return
	}
	var stop func()
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if p.Fanout == nil {
				return nil
			}
			s, err := p.Fanout.Listen(context.Background(), p.Hub)
			stop = s
			return err
		},
		OnStop: func(context.Context) error {
			p.Hub.Drain()
			if stop != nil {
				stop()
			}
			return nil
		},
	})
}

type operationsRouteParams struct {
	fx.In
	Config    config.Config
	Transport *httpapi.Transport
	Auth      ports.Authenticator
	Service   *operations.Service  `optional:"true"`
	Hub       *operations.WatchHub `optional:"true"`
	Clock     platform.Clock
	Log       *zap.Logger
}

// maxWatchMessageBytes bounds one message of the operations socket.
const maxWatchMessageBytes = 1 << 20

func newOperationsRoutes(p operationsRouteParams) ([]platform.RouteHandler, error) {
	if p.Service == nil {
		return nil, nil
	}
	if p.Auth == nil {
		return nil, errNoAuthenticator
	}
	log := p.Log.Named("operations")
	routes := []platform.RouteHandler{{Route: httpapi.RouteOperations, Handler: p.Transport.OperationsEndpoint(p.Auth, p.Service, log)}}
	if p.Hub != nil {
		o := socketMessageOptions(p.Config, p.Transport, p.Clock)
		// Watch messages are small JSON: a query's id and parameters.
		o.MaxMessageBytes = min(p.Config.Round.MaxDecodedBodyBytes, maxWatchMessageBytes)
		o.Log = log
		routes = append(routes, platform.RouteHandler{Route: httpapi.RouteOperationsRealtime, Handler: httpapi.OperationsRealtimeEndpoint(p.Auth, o, admitWatches(p.Hub))})
	}
	return routes, nil
}

// admitWatches is the hub's admission as the endpoint's.
func admitWatches(h *operations.WatchHub) httpapi.OperationsWatchAdmitFunc {
	return func(_ context.Context, id ports.Identity) (ports.RealtimeAdmission, error) {
		a, err := h.Admit(id)
		if err != nil {
			return nil, err
		}
		return a, nil
	}
}

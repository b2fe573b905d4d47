package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/syncd-dev/syncd/adapters/auth/dev"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// RouteHandler serves one sync API route. Provide it into the value group
// "syncd.routes" to replace the route's sync.not_found answer:
//
//	fx.Provide(fx.Annotate(newSyncRoute, fx.ResultTags(`group:"syncd.routes"`)))
type RouteHandler struct {
	Route   httpapi.Route
	Handler http.Handler
}

// CoreModule provides readiness, metrics, the listener address book, the
// node's socket slots and the schema source, and runs the readiness
// phases in the background.
var CoreModule = fx.Module("syncd.core",
	fx.Provide(
		NewReadiness,
		NewClock,
		portsClock,
		NewMetrics,
		NewListeners,
		NewSchemaSource,
		NewSchema,
		NewSocketSlots,
		NewPeriodicScheduler,
	),
	fx.Invoke(registerPreparer, registerChecks, registerCheckpointWatch, registerPoolMetrics),
)

// checksFirst orders the start: fx runs OnStart hooks in the order their
// constructors ran, and the storage engine opens (creating a missing
// SQLite file) in its hook, with the migration after it. Constructing the
// listeners (their binds) and the authenticator (a JWKS's first fetch)
// here, before any module asks for storage, puts the start steps that
// can fail ahead of the database; everything that fails while the graph
// is built (configuration files, key files, the schema, tracing) fails
// before any hook runs.
var checksFirst = fx.Module("syncd.checksfirst",
	fx.Invoke(func(*Listeners, ports.Authenticator) {}),
)

// AdminModule serves /livez, /readyz, /metrics and (--pprof) /debug/pprof
// on the admin listener; with --admin-token-file every route but the
// health probes requires that bearer token. --admin-api adds the
// read-only admin API (/admin/v1/...) and refuses to start without the
// token.
var AdminModule = fx.Module("syncd.admin",
	fx.Invoke(func(p serverParams, cfg config.Config, r *Readiness, m *Metrics, a adminParams) error {
		o := AdminOptions{Pprof: cfg.Admin.Pprof, Refresher: a.Refresher}
		if a.Leases != nil {
			o.Leases = a.Leases
		}
		if cfg.Admin.TokenFile != "" {
			tok, err := ReadAdminToken(cfg.Admin.TokenFile)
			if err != nil {
				return err
			}
			o.Token = tok
		}
		if cfg.Admin.API {
			if o.Token == "" {
				return errors.New("--admin-api requires --admin-token-file")
			}
			o.API = newAdminAPI(r, p.Log, a)
		}
		registerServer(p, ServerAdmin, cfg.AdminListen, NewAdminHandler(r, m, p.Log, o))
		return nil
	}),
)

type adminParams struct {
	fx.In
	Refresher ports.ScopeRefresher `optional:"true"`
	Storage   ports.Storage        `optional:"true"`
	// Reader, when provided, serves the admin lists; otherwise the
	// storage does when it implements ports.AdminReader (a host that
	// wraps its storage provides the reader beside it).
	Reader   ports.AdminReader  `optional:"true"`
	Segments ports.SegmentStore `optional:"true"`
	Leases   *leases.Service    `optional:"true"`
	Clock    ports.Clock
}

// SyncAPIModule serves the sync API on the main listener.
var SyncAPIModule = fx.Module("syncd.syncapi",
	fx.Provide(NewRouter),
	fx.Invoke(func(p serverParams, cfg config.Config, router *httpapi.Router, r *Readiness) {
		registerServerWith(p, ServerSync, cfg.Listen, router, serverOptions{
			IdleTimeout: cfg.HTTP.IdleTimeout,
			// /readyz never says ready before clients can connect.
			Bound: r.setListening,
		})
	}),
)

// RouterParams are the inputs of the sync API router.
type RouterParams struct {
	fx.In
	Config    config.Config
	Readiness *Readiness
	Metrics   *Metrics
	Log       *zap.Logger
	Clock     ports.Clock
	Routes    []RouteHandler       `group:"syncd.routes"`
	Tracer    trace.TracerProvider `optional:"true"`
}

// NewRouter builds the sync API router: the configured mount, the
// readiness gate, and the provided route handlers (others answer 404).
func NewRouter(p RouterParams) (*httpapi.Router, error) {
	handlers := map[httpapi.Route]http.Handler{}
	for _, rh := range p.Routes {
		if _, dup := handlers[rh.Route]; dup {
			return nil, fmt.Errorf("route %q provided twice", rh.Route)
		}
		handlers[rh.Route] = rh.Handler
	}
	return httpapi.New(httpapi.Options{
		Mount:    p.Config.Mount,
		Gate:     p.Readiness,
		Handlers: handlers,
		Logger:   p.Log.Named("syncapi"),
		Observe:  p.Metrics.ObserveHTTP,
		InFlight: p.Metrics.InFlightHTTP,
		Now:      p.Clock.Now,
		CORS:     corsOptions(p.Config),
		Tracer:   tracingOn(p.Tracer),
		AccessLog: func() *zap.Logger {
			if p.Config.HTTP.AccessLog {
				return p.Log.Named("access")
			}
			return nil
		}(),
	})
}

// corsOptions are the configured CORS origins and headers.
func corsOptions(c config.Config) httpapi.CORSOptions {
	return httpapi.CORSOptions{Origins: c.HTTP.CORSOriginList(), ExtraHeaders: c.HTTP.CORSHeaderList()}
}

// SchemaParams are the inputs of NewSchema.
type SchemaParams struct {
	fx.In
	Source    SchemaSource
	Readiness *Readiness
	Log       *zap.Logger
}

// NewSchema compiles the served schema while the graph is built (phase
// schema_compile), so every consumer gets it injected. An IR that does not
// compile fails the start: the server exits 1 and logs the refusal.
func NewSchema(p SchemaParams) (*schema.Schema, error) {
	s, err := CompileSchema(p.Source, p.Readiness)
	if err != nil {
		return nil, err
	}
	p.Log.Info("schema compiled", zap.String("schema", p.Source.Name),
		zap.Int32("schema_version", s.Version), zap.Int("tables", len(s.Tables)))
	return s, nil
}

// PrepareParams are the inputs of the readiness phases. Store and
// Declarations are optional: the storage module provides them.
type PrepareParams struct {
	fx.In
	Lifecycle    fx.Lifecycle
	Log          *zap.Logger
	Readiness    *Readiness
	Schema       *schema.Schema
	Store        ports.SchemaStore        `optional:"true"`
	Declarations []checkpoint.Declaration `optional:"true"`
}

// registerPreparer runs the storage readiness phases in a goroutine
// started by OnStart (the listeners are up meanwhile: /readyz reports the
// phase and the sync API answers sync.schema_not_ready).
func registerPreparer(p PrepareParams) {
	prep := &Preparer{Store: p.Store, Declarations: p.Declarations,
		Readiness: p.Readiness, Log: p.Log.Named("readiness")}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Go(func() { _ = prep.Run(ctx, p.Schema, DefaultBackoff()) })
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			wg.Wait()
			return nil
		},
	})
}

// checkParams are the inputs of the readiness dependency checks.
type checkParams struct {
	fx.In
	Readiness *Readiness
	Clock     Clock
	Storage   ports.HealthChecker `optional:"true"`
}

// registerChecks makes /readyz probe storage (when the graph has a
// ports.HealthChecker) once the phases are done.
func registerChecks(p checkParams) {
	if p.Storage != nil {
		p.Readiness.AddCheck(Check{Name: "storage", Probe: p.Storage.Ping, Now: p.Clock.Now})
	}
}

// drainParams are the inputs of the lame-duck stop.
type drainParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Readiness *Readiness
	Clock     Clock
	Log       *zap.Logger
}

// registerDrain is the first stop step (its hook is registered last):
// /readyz turns 503 draining while the listeners keep serving for
// --shutdown-delay, so load balancers stop routing here before the
// listeners close; then the servers' own hooks let in-flight requests
// finish.
func registerDrain(p drainParams) {
	p.Lifecycle.Append(fx.StopHook(func(ctx context.Context) error {
		p.Readiness.Drain()
		p.Log.Info("draining: readiness off, listeners open until the shutdown delay ends",
			zap.Duration("shutdown_delay", p.Config.ShutdownDelay))
		if err := p.Clock.Sleep(ctx, p.Config.ShutdownDelay); err != nil {
			return fmt.Errorf("shutdown delay: %w", err)
		}
		p.Log.Info("closing listeners")
		return nil
	}))
}

// bannerParams are the inputs of the startup banner.
type bannerParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Source    SchemaSource
	Listeners *Listeners
	Readiness *Readiness
	Log       *zap.Logger
	Banner    *Banner `optional:"true"`
}

// Banner is where development setups print client instructions at start.
type Banner struct{ Out io.Writer }

// WithBanner prints client instructions to w at start when the server runs
// the demo schema or --dev.
func WithBanner(w io.Writer) fx.Option { return fx.Supply(&Banner{Out: w}) }

// registerBanner logs where the server listens once both listeners are
// bound and prints client instructions for development setups.
func registerBanner(p bannerParams) {
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			syncURL := "http://" + hostPort(p.Listeners.Addr(ServerSync)) + p.Config.Mount
			adminURL := "http://" + hostPort(p.Listeners.Addr(ServerAdmin))
			kind, _, _ := config.ParseDatabase(p.Config.Database)
			p.Log.Info("syncd started",
				zap.String("sync_url", syncURL+"/sync"),
				zap.String("realtime_url", "ws"+strings.TrimPrefix(syncURL, "http")+"/realtime"),
				zap.String("admin_url", adminURL),
				zap.String("schema", p.Source.Name),
				zap.String("database_kind", string(kind)),
				zap.String("database", p.Config.Redacted().Database),
				zap.String("auth", p.Config.Auth))
			if p.Config.Auth == config.AuthDev {
				p.Log.Warn(dev.Warning)
			}
			if p.Banner != nil && p.Banner.Out != nil && (p.Config.Dev || p.Config.DemoSchema()) {
				_, _ = fmt.Fprintf(p.Banner.Out, `
syncd is listening.
  sync API:   %[1]s/sync   (POST, SSP2 %[6]s)
  realtime:   ws%[2]s/realtime
  admin:      %[3]s/readyz  %[3]s/metrics
  schema:     %[4]s
  database:   %[5]s

Point a Syncular client at base URL %[1]s`, syncURL, strings.TrimPrefix(syncURL, "http"), adminURL,
					p.Source.Name, p.Config.Redacted().Database, wireVersions(p.Config))
				if origins := p.Config.HTTP.CORSOriginList(); len(origins) > 0 {
					_, _ = fmt.Fprintf(p.Banner.Out, "\nBrowser apps may call it from: %s", strings.Join(origins, ", "))
				}
				if p.Config.Auth == config.AuthDev {
					_, _ = fmt.Fprintf(p.Banner.Out, `
Development authentication: send header %s: <user id> (optional %s, %s).`, dev.HeaderActor, dev.HeaderPartition, dev.HeaderScopes)
					if a := p.Config.DevAuth.Actor; a != "" {
						_, _ = fmt.Fprintf(p.Banner.Out, "\nRequests without it act as %q (--dev-actor).", a)
					}
					_, _ = fmt.Fprint(p.Banner.Out, "\nNever expose this server to untrusted clients in this mode.")
				}
				_, _ = fmt.Fprintf(p.Banner.Out, "\nTry: curl -s %s/readyz\n\n", adminURL)
			}
			return nil
		},
	})
}

// wireVersions names the admitted wire versions for the banner.
func wireVersions(c config.Config) string {
	if c.Sync.MinWireVersion <= 2 {
		return "wire 3 and 2"
	}
	return "wire 3"
}

func hostPort(a net.Addr) string {
	if a == nil {
		return "unbound"
	}
	return a.String()
}

// FxLogger routes fx's own events through zap at debug level. Failures
// are debug too: Run reports each one once, by its root cause.
func FxLogger(log *zap.Logger) fxevent.Logger {
	l := &fxevent.ZapLogger{Logger: log.Named("fx")}
	l.UseLogLevel(zapcore.DebugLevel)
	l.UseErrorLevel(zapcore.DebugLevel)
	return l
}

// Options is the whole server graph for cfg. extra adds modules (storage,
// authentication, route handlers) and overrides.
func Options(cfg config.Config, info BuildInfo, log *zap.Logger, extra ...fx.Option) fx.Option {
	return fx.Options(
		fx.Supply(cfg, info, log),
		fx.WithLogger(FxLogger),
		fx.StopTimeout(cfg.ShutdownDelay+cfg.ShutdownTimeout),
		// Start hooks connect to the database and create the side stores'
		// tables; on a busy PostgreSQL that can outlast fx's 15 s default,
		// and a slow start beats a refused one (signals are relayed
		// meanwhile; the schema migration itself runs in the readiness
		// phases, not here).
		fx.StartTimeout(startTimeout),
		checksFirst,
		CoreModule,
		EventsModule,
		TracingModule,
		AuthModule,
		AdminModule,
		SyncAPIModule,
		SyncModule,
		FanoutModule,
		SegmentsModule,
		BlobsModule,
		OperationsModule,
		KeysModule,
		TestControlModule,
		BackfillModule,
		fx.Options(extra...),
		fx.Invoke(registerBanner),
		fx.Invoke(registerDrain),
	)
}

// startTimeout bounds the start hooks (see Options).
const startTimeout = 2 * time.Minute

// Run starts the graph, waits for SIGINT or SIGTERM (or an internal
// shutdown), stops gracefully and returns the process exit code.
func Run(cfg config.Config, info BuildInfo, log *zap.Logger, extra ...fx.Option) int {
	a := fx.New(Options(cfg, info, log, extra...))
	if err := a.Err(); err != nil {
		log.Error("cannot assemble the server", zap.String("error", dig.RootCause(err).Error()))
		toTerminal("cannot start", dig.RootCause(err))
		return 1
	}
	// Signals are relayed from before the start: the listeners serve (and
	// /readyz may answer) while later start hooks still run, and a SIGTERM
	// then must mean a graceful stop, not the default exit.
	done := a.Wait()
	startCtx, cancel := context.WithTimeout(context.Background(), a.StartTimeout())
	defer cancel()
	if err := a.Start(startCtx); err != nil {
		log.Error("cannot start", zap.String("error", dig.RootCause(err).Error()))
		toTerminal("cannot start", dig.RootCause(err))
		return 1
	}
	sig := <-done
	log.Info("shutting down", zap.String("signal", fmt.Sprint(sig.Signal)), zap.Int("exit_code", sig.ExitCode))
	stopCtx, cancelStop := context.WithTimeout(context.Background(), a.StopTimeout())
	defer cancelStop()
	code := sig.ExitCode
	if err := a.Stop(stopCtx); err != nil {
		log.Error("unclean shutdown", zap.Error(err))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// toTerminal repeats a start-up failure as one plain line when standard
// error is a terminal: the JSON log line is for collectors, not for the
// person who just typed the command.
func toTerminal(what string, err error) {
	if st, serr := os.Stderr.Stat(); serr == nil && st.Mode()&os.ModeCharDevice != 0 {
		_, _ = fmt.Fprintf(os.Stderr, "\nsyncd: %s: %v\n", what, err)
	}
}

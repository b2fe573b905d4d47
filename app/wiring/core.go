package wiring

import (
	"context"
	"sync"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// CoreModule provides readiness, metrics and the listener address book,
// and runs the readiness phases in the background (the schema they
// prepare storage for comes from SchemaModule).
var CoreModule = fx.Module("syncd.core",
	fx.Provide(
		platform.NewReadiness,
		platform.NewClock,
		platform.PortsClock,
		platform.NewMetrics,
		platform.NewListeners,
	),
	fx.Invoke(registerPreparer, registerChecks, registerPoolMetrics),
)

// ChecksFirst orders the start: fx runs OnStart hooks in the order their
// constructors ran, and the storage engine opens (creating a missing
// SQLite file) in its hook, with the migration after it. Constructing the
// listeners (their binds) and the authenticator (a JWKS's first fetch)
// here, before any module asks for storage, puts the start steps that
// can fail ahead of the database; everything that fails while the graph
// is built (configuration files, key files, the schema, tracing) fails
// before any hook runs.
var ChecksFirst = fx.Module("syncd.checksfirst",
	fx.Invoke(func(*platform.Listeners, ports.Authenticator) {}),
)

// SyncAPIModule serves the sync API on the main listener.
var SyncAPIModule = fx.Module("syncd.syncapi",
	fx.Provide(platform.NewRouter),
	fx.Invoke(func(p platform.ServerParams, cfg config.Config, router *httpapi.Router, r *platform.Readiness) {
		platform.RegisterServerWith(p, platform.ServerSync, cfg.Listen, router, platform.ServerOptions{
			IdleTimeout: cfg.HTTP.IdleTimeout,
			// /readyz never says ready before clients can connect.
			Bound: r.SetListening,
		})
	}),
)

// PrepareParams are the inputs of the readiness phases. Store and
// Declarations are optional: the storage module provides them.
type PrepareParams struct {
	fx.In
	Lifecycle    fx.Lifecycle
	Log          *zap.Logger
	Readiness    *platform.Readiness
	Schema       *schema.Schema
	Store        ports.SchemaStore        `optional:"true"`
	Declarations []checkpoint.Declaration `optional:"true"`
}

// registerPreparer runs the storage readiness phases in a goroutine
// started by OnStart (the listeners are up meanwhile: /readyz reports the
// phase and the sync API answers sync.schema_not_ready).
func registerPreparer(p PrepareParams) {
	prep := &platform.Preparer{Store: p.Store, Declarations: p.Declarations,
		Readiness: p.Readiness, Log: p.Log.Named("readiness")}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Go(func() { _ = prep.Run(ctx, p.Schema, platform.DefaultBackoff()) })
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
	Readiness *platform.Readiness
	Clock     platform.Clock
	Storage   ports.HealthChecker `optional:"true"`
}

// registerChecks makes /readyz probe storage (when the graph has a
// ports.HealthChecker) once the phases are done.
func registerChecks(p checkParams) {
	if p.Storage != nil {
		p.Readiness.AddCheck(platform.Check{Name: "storage", Probe: p.Storage.Ping, Now: p.Clock.Now})
	}
}

// TracingModule provides the trace.TracerProvider of the graph, configured
// by the standard OpenTelemetry variables: an SDK provider exporting OTLP
// over HTTP when an endpoint is set, the no-op provider otherwise. The
// sync API, the socket rounds and the storage engine take it.
var TracingModule = fx.Module("syncd.tracing", fx.Provide(platform.NewTracerProvider))

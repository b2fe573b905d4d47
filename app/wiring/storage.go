package wiring

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/ports"
)

// StorageModule opens the engine --database names and provides it as
// ports.Storage and, as their own bindings, ports.SchemaStore, so the
// readiness phases create or verify the layout before anything is served,
// and ports.HealthChecker, which /readyz probes.
// Programs that bring their own storage leave this module out and
// provide both themselves.
var StorageModule = fx.Module("syncd.storage",
	fx.Provide(NewStorage),
	fx.Provide(func(s ports.Storage) ports.SchemaStore { return s }),
	fx.Provide(func(s ports.Storage) ports.HealthChecker { return s }),
)

type poolMetricsParams struct {
	fx.In
	Storage ports.Storage     `optional:"true"`
	Metrics *platform.Metrics `optional:"true"`
}

// registerPoolMetrics exports the storage's connection pools.
func registerPoolMetrics(p poolMetricsParams) error {
	return p.Metrics.RegisterPools(p.Storage)
}

// StorageParams are the inputs of NewStorage.
type StorageParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Log       *zap.Logger
	Clock     ports.Clock
	Tracer    trace.TracerProvider `optional:"true"`
}

// NewStorage prepares the configured engine and opens it in OnStart:
// connecting, and creating a missing SQLite file, is the first start step
// that touches the database, and it comes after every check that can
// fail (see ChecksFirst), so a refused start leaves no database behind.
// The layout is the readiness phases' business. The engine closes when
// the server stops.
func NewStorage(p StorageParams) (ports.Storage, error) {
	st, err := newStorage(p.Config, p.Clock, platform.TracingOn(p.Tracer))
	if err != nil {
		return nil, err
	}
	kind, _, _ := config.ParseDatabase(p.Config.Database)
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, p.Config.ShutdownTimeout)
			defer cancel()
			if err := st.Connect(ctx); err != nil {
				_ = st.Close()
				return err
			}
			p.Log.Info("storage opened", zap.String("engine", string(kind)),
				zap.String("database", p.Config.Redacted().Database))
			return nil
		},
		OnStop: func(context.Context) error { return st.Close() },
	})
	return st, nil
}

// touchInterval bounds how stale a partition's last-seen time may be.
const touchInterval = sqlstore.DefaultTouchInterval

// OpenStorage opens the storage engine --database names: a SQLite file
// (a path or sqlite:PATH) or a postgres:// URL; clk stamps what the store
// writes on its own (the schema marker).
func OpenStorage(ctx context.Context, cfg config.Config, clk ports.Clock) (ports.Storage, error) {
	return openStorage(ctx, cfg, clk, nil)
}

// openStorage is OpenStorage with the engine's spans on tp (nil: none).
func openStorage(ctx context.Context, cfg config.Config, clk ports.Clock, tp trace.TracerProvider) (ports.Storage, error) {
	st, err := newStorage(cfg, clk, tp)
	if err != nil {
		return nil, err
	}
	if err := st.Connect(ctx); err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

// connectingStorage is an engine that opens its database in Connect.
type connectingStorage interface {
	ports.Storage
	Connect(context.Context) error
}

// newStorage prepares the engine --database names without opening it.
func newStorage(cfg config.Config, clk ports.Clock, tp trace.TracerProvider) (connectingStorage, error) {
	kind, dsn, err := config.ParseDatabase(cfg.Database)
	if err != nil {
		return nil, err
	}
	recent := cfg.Pull.RecentLogBytes
	if recent == 0 {
		recent = -1 // none kept
	}
	switch kind {
	case config.Postgres:
		return postgres.New(postgres.Options{DSN: dsn, TouchInterval: touchInterval, Now: clk.Now, Tracer: tp, RecentLogBytes: recent})
	case config.SQLite:
		return sqlite.New(sqlite.Options{Path: dsn, TouchInterval: touchInterval, Now: clk.Now, Tracer: tp, RecentLogBytes: recent})
	}
	return nil, fmt.Errorf("database: unsupported engine %q", kind)
}

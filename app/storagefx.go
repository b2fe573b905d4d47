package app

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app/config"
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

// pooled is a store on database/sql pools (both SQL engines).
type pooled interface{ Pools() map[string]*sql.DB }

type poolMetricsParams struct {
	fx.In
	Storage ports.Storage `optional:"true"`
	Metrics *Metrics      `optional:"true"`
}

// registerPoolMetrics exports the connection pools' statistics
// (go_sql_* by db_name: open, in use, idle, waits, wait time).
func registerPoolMetrics(p poolMetricsParams) error {
	ps, ok := p.Storage.(pooled)
	if !ok || p.Metrics == nil || p.Metrics.Registry == nil {
		return nil
	}
	for role, db := range ps.Pools() {
		if err := p.Metrics.Registry.Register(collectors.NewDBStatsCollector(db, "syncd_"+role)); err != nil {
			return err
		}
	}
	return nil
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

// NewStorage opens the configured engine and closes it when the server
// stops. Opening only connects (and creates a missing SQLite file); the
// layout is the readiness phases' business.
func NewStorage(p StorageParams) (ports.Storage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.Config.ShutdownTimeout)
	defer cancel()
	st, err := openStorage(ctx, p.Config, p.Clock, tracingOn(p.Tracer))
	if err != nil {
		return nil, err
	}
	kind, _, _ := config.ParseDatabase(p.Config.Database)
	p.Log.Info("storage opened", zap.String("engine", string(kind)),
		zap.String("database", p.Config.Redacted().Database))
	p.Lifecycle.Append(fx.StopHook(st.Close))
	return st, nil
}

// touchInterval bounds how stale a partition's last-seen time may be:
// refreshing it on every request would cost a write transaction each.
const touchInterval = time.Second

// OpenStorage opens the storage engine --database names: a SQLite file
// (a path or sqlite:PATH) or a postgres:// URL; clk stamps what the store
// writes on its own (the schema marker).
func OpenStorage(ctx context.Context, cfg config.Config, clk ports.Clock) (ports.Storage, error) {
	return openStorage(ctx, cfg, clk, nil)
}

// openStorage is OpenStorage with the engine's spans on tp (nil: none).
func openStorage(ctx context.Context, cfg config.Config, clk ports.Clock, tp trace.TracerProvider) (ports.Storage, error) {
	kind, dsn, err := config.ParseDatabase(cfg.Database)
	if err != nil {
		return nil, err
	}
	switch kind {
	case config.Postgres:
		return postgres.Open(ctx, postgres.Options{DSN: dsn, TouchInterval: touchInterval, Now: clk.Now, Tracer: tp})
	case config.SQLite:
		return sqlite.Open(ctx, sqlite.Options{Path: dsn, TouchInterval: touchInterval, Now: clk.Now, Tracer: tp})
	}
	return nil, fmt.Errorf("database: unsupported engine %q", kind)
}

package wiring

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/leases/memlease"
	"github.com/syncd-dev/syncd/adapters/leases/sqllease"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/ports"
)

// LeasesModule provides the auth-lease use case (SPEC §7.3) when
// --auth-lease-ttl is set: the lease store (in the sync database over an
// SQL engine, in process memory over any other storage), the sealing keys
// of --auth-lease-key-file, and the *leases.Service the sync use case and
// the realtime hub consult. Off, it provides a nil service: no LEASE
// frame, and a resolver outage fails requests with the retryable
// sync.auth_lease_required.
//
// Leases matter to hosts whose ports.ScopeResolver can report an outage
// (ports.ErrResolverOutage); the built-in dev and jwt resolvers never do.
// A host replaces the store with fx.Decorate:
//
//	fx.Decorate(func(ports.LeaseStore) ports.LeaseStore { return myStore })
var LeasesModule = fx.Module("syncd.leases",
	fx.Provide(NewLeaseKeys, NewLeaseStore, NewLeaseService),
	fx.Invoke(scheduleLeasePrune),
)

// leasePruneInterval is how often expired leases and stale revocations
// are deleted.
const leasePruneInterval = time.Hour

type leasePrunerParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Log       *zap.Logger
	Clock     platform.Clock
	Scheduler *periodic.Scheduler
	Store     ports.LeaseStore `optional:"true"`
}

// scheduleLeasePrune prunes the lease store hourly while leases are on.
func scheduleLeasePrune(p leasePrunerParams) error {
	if p.Store == nil || p.Config.Leases.TTL <= 0 {
		return nil
	}
	log := p.Log.Named("leases")
	pr, err := leases.NewPruner(p.Store, p.Config.Leases.TTL, p.Clock.Now, log)
	if err != nil {
		return err
	}
	schedule(p.Lifecycle, p.Scheduler, periodic.Job{Name: "lease prune pass", Interval: leasePruneInterval, Pass: pr.Pass, Log: log})
	return nil
}

// NewLeaseKeys reads --auth-lease-key-file; nil with leases off.
func NewLeaseKeys(cfg config.Config) (*lease.KeySet, error) {
	if cfg.Leases.TTL == 0 {
		return nil, nil
	}
	keys, err := platform.ReadKeyFile(cfg.Leases.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--auth-lease-key-file: %w", err)
	}
	ks, err := lease.NewKeySet(keys...)
	if err != nil {
		return nil, fmt.Errorf("--auth-lease-key-file %s: %w", cfg.Leases.KeyFile, err)
	}
	return ks, nil
}

// LeaseStoreParams are the inputs of the lease store.
type LeaseStoreParams struct {
	fx.In
	Config config.Config
	Log    *zap.Logger
	Clock  ports.Clock
	Store  ports.Storage `optional:"true"`
}

// NewLeaseStore opens the lease store; nil with leases off or without
// storage.
func NewLeaseStore(lc fx.Lifecycle, p LeaseStoreParams) ports.LeaseStore {
	if p.Store == nil || p.Config.Leases.TTL == 0 {
		return nil
	}
	h, ok := p.Store.(dbHandles)
	if !ok {
		p.Log.Warn("the storage is not an SQL engine: auth leases are kept in process memory and lost on restart")
		return memlease.NewWithClock(func() int64 { return p.Clock.Now().UnixMilli() })
	}
	l := &platform.LazyLeases{}
	// The engine opens in its own start hook, which runs before this one.
	lc.Append(fx.Hook{OnStart: func(ctx context.Context) error {
		s, err := sqllease.Open(ctx, sqllease.Options{DB: h.DB(), ReadDB: h.ReadDB(),
			Now: func() int64 { return p.Clock.Now().UnixMilli() }})
		l.Set(s)
		return err
	}})
	return l
}

// LeaseServiceParams are the inputs of the lease use case.
type LeaseServiceParams struct {
	fx.In
	Config  config.Config
	Log     *zap.Logger
	Clock   ports.Clock
	Metrics *platform.Metrics
	Keys    *lease.KeySet    `optional:"true"`
	Store   ports.LeaseStore `optional:"true"`
}

// NewLeaseService builds the lease use case; nil with leases off.
func NewLeaseService(p LeaseServiceParams) (*leases.Service, error) {
	if p.Config.Leases.TTL == 0 || p.Store == nil || p.Keys == nil {
		return nil, nil
	}
	m, err := leases.NewMetrics(p.Metrics.Registry)
	if err != nil {
		return nil, err
	}
	p.Log.Info("auth leases on", zap.Duration("ttl", p.Config.Leases.TTL),
		zap.Duration("refresh", p.Config.Leases.EffectiveRefresh()), zap.Int("sealing_keys", p.Keys.Len()))
	return leases.New(leases.Options{
		Store: p.Store, Keys: p.Keys, TTL: p.Config.Leases.TTL, Refresh: p.Config.Leases.EffectiveRefresh(),
		Now: p.Clock.Now, Log: p.Log.Named("leases"), Metrics: m,
	})
}

package wiring

import (
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/retention"
	"github.com/syncd-dev/syncd/ports"
)

// RetentionModule prunes the commit log (app/retention) every
// --prune-interval while the server runs.
var RetentionModule = fx.Module("syncd.retention",
	fx.Invoke(scheduleRetention),
)

// RetentionParams are the inputs of the retention job.
type RetentionParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Log       *zap.Logger
	Clock     platform.Clock
	Metrics   *platform.Metrics
	Scheduler *periodic.Scheduler
	Store     ports.Storage   `optional:"true"`
	Events    ports.EventSink `optional:"true"`
}

// scheduleRetention prunes the commit log every --prune-interval; off
// without storage or with --prune-interval 0.
func scheduleRetention(p RetentionParams) error {
	if p.Store == nil || p.Config.Retention.PruneInterval <= 0 {
		return nil
	}
	m, err := retention.NewMetrics(p.Metrics.Registry)
	if err != nil {
		return err
	}
	log := p.Log.Named("retention")
	if p.Config.Retention.ToActiveFloorsUnsafe {
		log.Warn("UNSAFE retention for tests and load runs: the commit log is pruned down to the active clients' cursor floor, below the SPEC 4.6 minimums",
			zap.Duration("active_window", p.Config.Retention.ActiveWindow))
	}
	pr, err := retention.New(retention.Options{Store: p.Store, Policy: RetentionPolicy(p.Config), Unfloored: p.Config.Retention.ToActiveFloorsUnsafe,
		Events: p.Events, Metrics: m, Log: log, Now: p.Clock.Now})
	if err != nil {
		return err
	}
	schedule(p.Lifecycle, p.Scheduler, periodic.Job{Name: "prune pass", Interval: p.Config.Retention.PruneInterval, Pass: pr.Pass, Log: log})
	return nil
}

// RetentionPolicy is the configured §4.6 policy (with
// --prune-to-active-floors-UNSAFE-for-tests, retention.ToActiveFloors,
// which retention.New takes only with Options.Unfloored).
func RetentionPolicy(cfg config.Config) retention.Policy {
	if cfg.Retention.ToActiveFloorsUnsafe {
		return retention.ToActiveFloors(cfg.Retention.ActiveWindow)
	}
	return retention.Policy{
		ActiveWindow: cfg.Retention.ActiveWindow,
		ForceAge:     cfg.Retention.ForceAge,
		KeepCommits:  cfg.Retention.KeepCommits,
	}
}

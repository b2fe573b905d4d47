package app

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/segments/imagebuilder"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/retention"
	"github.com/syncd-dev/syncd/ports"
)

// PullModule provides the pull half of POST /sync (app/pull) and runs the
// commit-log retention scheduler (app/retention) while the server runs.
var PullModule = fx.Module("syncd.pull",
	fx.Provide(NewPullMetrics, NewPullService, NewRetentionScheduler),
	fx.Invoke(startRetention),
)

// NewPullMetrics registers the pull counters on the server registry.
func NewPullMetrics(m *Metrics) (*pull.Metrics, error) {
	return pull.NewMetrics(m.Registry)
}

// PullServiceParams are the inputs of the pull service.
type PullServiceParams struct {
	fx.In
	Config   config.Config
	Log      *zap.Logger
	Clock    ports.Clock
	Metrics  *pull.Metrics
	Store    ports.Storage      `optional:"true"`
	Segments ports.SegmentStore `optional:"true"`
	Signer   pull.URLSigner     `optional:"true"`
}

// NewPullService builds the pull use case; nil without storage.
func NewPullService(p PullServiceParams) (*pull.Service, error) {
	if p.Store == nil {
		return nil, nil
	}
	o := pull.Options{
		Store:               p.Store,
		Signer:              p.Signer,
		SegmentTTL:          p.Config.Segments.TTL,
		SpoolMemoryBytes:    p.Config.Sync.PullSpoolMemoryBytes,
		ResponseBudgetBytes: p.Config.Sync.PullResponseBudgetBytes,
		ClientRefresh:       p.Config.Sync.ClientRecordRefresh,
		CatchUpChanges:      p.Config.Sync.PullCatchUpChanges,
		Metrics:             p.Metrics,
		Log:                 p.Log.Named("pull"),
		Now:                 p.Clock.Now,
	}
	if o.ClientRefresh == 0 {
		o.ClientRefresh = -1 // --client-record-refresh 0: every pull writes
	}
	if p.Segments != nil {
		o.Segments = p.Segments
	}
	if p.Config.Segments.Images {
		b, err := imagebuilder.New(imagebuilder.Options{Dir: p.Config.Segments.ImageDir})
		if err != nil {
			return nil, fmt.Errorf("--image-dir: %w", err)
		}
		o.Images = b
	}
	return pull.New(o)
}

// RetentionParams are the inputs of the retention scheduler.
type RetentionParams struct {
	fx.In
	Config  config.Config
	Log     *zap.Logger
	Clock   Clock
	Metrics *Metrics
	Store   ports.Storage   `optional:"true"`
	Events  ports.EventSink `optional:"true"`
}

// NewRetentionScheduler builds the prune scheduler; nil without storage or
// with --prune-interval 0.
func NewRetentionScheduler(p RetentionParams) (*retention.Scheduler, error) {
	if p.Store == nil || p.Config.Sync.PruneInterval <= 0 {
		return nil, nil
	}
	pr, err := retention.New(retention.Options{Store: p.Store, Policy: RetentionPolicy(p.Config), Events: p.Events, Log: p.Log.Named("retention"), Now: p.Clock.Now})
	if err != nil {
		return nil, err
	}
	passes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "syncd_prune_passes_total",
		Help: "Scheduled commit-log prune passes, by result (ok, error).",
	}, []string{"result"})
	removed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "syncd_pruned_commits_total",
		Help: "Commits removed by scheduled prune passes.",
	})
	lag := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "syncd_commit_log_lag_commits",
		Help: "At the last prune pass, the most commits any partition's slowest active client was behind its newest commit.",
	})
	for _, c := range []prometheus.Collector{passes, removed, lag} {
		if err := p.Metrics.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	onPass := func(res []retention.PartitionResult, err error) {
		result := "ok"
		if err != nil {
			result = "error"
		}
		passes.WithLabelValues(result).Inc()
		most := int64(0)
		for _, r := range res {
			removed.Add(float64(r.RemovedCommits))
			most = max(most, r.Lag)
		}
		if err == nil {
			lag.Set(float64(most))
		}
	}
	return retention.NewScheduler(pr, p.Config.Sync.PruneInterval, p.Clock.Sleep, p.Log.Named("retention"), onPass), nil
}

// RetentionPolicy is the configured §4.6 policy.
func RetentionPolicy(cfg config.Config) retention.Policy {
	return retention.Policy{
		ActiveWindow: cfg.Sync.RetentionActiveWindow,
		ForceAge:     cfg.Sync.RetentionForceAge,
		KeepCommits:  cfg.Sync.RetentionKeepCommits,
	}
}

func startRetention(lc fx.Lifecycle, s *retention.Scheduler) {
	if s == nil {
		return
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { s.Start(); return nil },
		OnStop:  s.Stop,
	})
}

package wiring

import (
	"errors"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/reactions"
	"github.com/syncd-dev/syncd/ports"
)

// GroupReactionHandlers is the value group of durable reaction handlers.
const GroupReactionHandlers = "syncd.reaction_handlers"

// reactionPollInterval is how often the runner looks for due reactions.
const reactionPollInterval = time.Second

type reactionRunnerParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Log       *zap.Logger
	Clock     platform.Clock
	Scheduler *periodic.Scheduler
	Metrics   *reactions.Metrics      `optional:"true"`
	Store     ports.Storage           `optional:"true"`
	Handlers  []ports.ReactionHandler `group:"syncd.reaction_handlers"`
	Events    ports.EventSink         `optional:"true"`
}

// registerReactionRunner delivers reactions in the background, every
// second on the app clock, when the host registered handlers. A storage
// without the reaction queue fails the start rather than silently never
// delivering.
func registerReactionRunner(p reactionRunnerParams) error {
	if p.Store == nil || len(p.Handlers) == 0 {
		return nil
	}
	q, ok := p.Store.(ports.ReactionQueue)
	if !ok {
		return errors.New("reaction handlers are registered but the storage cannot deliver reactions")
	}
	log := p.Log.Named("reactions")
	r, err := reactions.New(reactions.Options{Queue: p.Metrics.Queue(q), Partitions: p.Store, Handlers: p.Handlers, Events: p.Events, Log: log, Now: p.Clock.Now})
	if err != nil {
		return err
	}
	schedule(p.Lifecycle, p.Scheduler, periodic.Job{Name: "reaction delivery pass", Interval: reactionPollInterval, Pass: r.Pass, Log: log})
	return nil
}

// ReactionPrunerParams are the inputs of the reaction retention job.
type ReactionPrunerParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Log       *zap.Logger
	Clock     platform.Clock
	Scheduler *periodic.Scheduler
	Metrics   *reactions.Metrics `optional:"true"`
	Store     ports.Storage      `optional:"true"`
}

// scheduleReactionPrune deletes completed and dead-lettered reactions
// past --reaction-keep-* every --reaction-prune-interval; off without a
// storage keeping reactions or with --reaction-prune-interval 0. It runs
// whether or not this node delivers reactions: terminal rows accumulate
// either way.
func scheduleReactionPrune(p ReactionPrunerParams) error {
	if p.Store == nil || p.Config.Reactions.PruneInterval <= 0 {
		return nil
	}
	q, ok := p.Store.(ports.ReactionQueue)
	if !ok {
		return nil
	}
	log := p.Log.Named("reactions")
	pr, err := ReactionPruner(p.Config, p.Metrics.Queue(q), p.Store, p.Clock, log, p.Metrics.PrunePass)
	if err != nil {
		return err
	}
	schedule(p.Lifecycle, p.Scheduler, periodic.Job{Name: "reaction prune pass", Interval: p.Config.Reactions.PruneInterval, Pass: pr.Pass, Log: log})
	return nil
}

// ReactionPruner is the configured reaction retention (the scheduled
// job's and "syncd reactions prune"'s); passed (optional) hears every
// scheduled pass.
func ReactionPruner(cfg config.Config, q ports.ReactionQueue, parts ports.PartitionStore, clk ports.Clock, log *zap.Logger, passed func(error)) (*reactions.Pruner, error) {
	return reactions.NewPruner(reactions.PruneOptions{Queue: q, Partitions: parts, KeepCompleted: cfg.Reactions.KeepCompleted,
		KeepDeadLetter: cfg.Reactions.KeepDeadLetter, Now: clk.Now, Log: log, Passed: passed})
}

// ReactionsModule delivers durable reactions with the registered handlers
// and prunes terminal ones.
var ReactionsModule = fx.Module("syncd.reactions",
	fx.Provide(newReactionMetrics),
	fx.Invoke(registerReactionRunner, scheduleReactionPrune),
)

type reactionMetricsParams struct {
	fx.In
	Metrics *platform.Metrics `optional:"true"`
}

// newReactionMetrics registers the reaction counters; nil without a
// registry (a graph without metrics counts nothing).
func newReactionMetrics(p reactionMetricsParams) (*reactions.Metrics, error) {
	if p.Metrics == nil {
		return nil, nil
	}
	return reactions.NewMetrics(p.Metrics.Registry)
}

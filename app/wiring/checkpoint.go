package wiring

import (
	"errors"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/checkpoint"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/push"
	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// CheckpointModule provides *checkpoint.Runner, the Go API a host that
// embeds the server uses to declare, run and activate backfill
// checkpoints from its own code (its batches are server commits of the
// graph's sync use case). The runner is built only when something asks
// for it; the module also makes /readyz watch the declared checkpoints.
var CheckpointModule = fx.Module("syncd.checkpoint",
	fx.Provide(NewCheckpointRunner),
	fx.Invoke(registerCheckpointWatch),
)

// CheckpointProgress is a host's hook (app.WithCheckpointProgress): when
// provided, it hears every step of the graph runner's backfills; logs and
// metrics are the runner's own.
type CheckpointProgress func(checkpoint.Progress)

// CheckpointRunnerParams are the inputs of NewCheckpointRunner.
type CheckpointRunnerParams struct {
	fx.In
	Schema   *schema.Schema
	Storage  ports.Storage  `optional:"true"`
	Sync     *push.Pipeline `optional:"true"`
	Clock    ports.Clock
	Log      *zap.Logger
	Metrics  *platform.Metrics  `optional:"true"`
	Progress CheckpointProgress `optional:"true"`
	Events   ports.EventSink    `optional:"true"`
}

// NewCheckpointRunner builds the runner over the graph's storage and sync
// use case. Storage without a table scanner (a host's own port) is
// refused: the runner hands Backfillers one.
func NewCheckpointRunner(p CheckpointRunnerParams) (*checkpoint.Runner, error) {
	if p.Storage == nil || p.Sync == nil {
		return nil, errors.New("backfill: the graph has no storage or sync use case")
	}
	st, ok := p.Storage.(checkpoint.Store)
	if !ok {
		return nil, errors.New("backfill: the storage implements no ports.TableScanner")
	}
	var m *checkpoint.Metrics
	if p.Metrics != nil && p.Metrics.Registry != nil {
		var err error
		if m, err = checkpoint.NewMetrics(p.Metrics.Registry); err != nil {
			return nil, err
		}
	}
	return checkpoint.New(checkpoint.Options{Store: st, Commits: p.Sync, Schema: p.Schema, Clock: p.Clock,
		Log: p.Log.Named("backfill"), Metrics: m, OnProgress: checkpoint.ProgressHooks(p.Progress, p.Events, p.Clock.Now)})
}

// CheckpointDeclarations provides the declarations of --checkpoints at
// the running schema version (the stock binary's; a host that embeds the
// server provides its own []cpdomain.Declaration instead).
func CheckpointDeclarations(cfg config.Config) fx.Option {
	refs, err := cfg.CheckpointList()
	if err != nil {
		return fx.Error(err)
	}
	if len(refs) == 0 {
		return fx.Options()
	}
	return fx.Provide(func(s *schema.Schema) []cpdomain.Declaration {
		out := make([]cpdomain.Declaration, len(refs))
		for i, r := range refs {
			out[i] = cpdomain.Declaration{Partition: r.Partition, Name: r.Name, SchemaVersion: s.Version}
		}
		return out
	})
}

// checkpointWatchParams are the inputs of the readiness checkpoint watch.
type checkpointWatchParams struct {
	fx.In
	Readiness    *platform.Readiness
	Storage      ports.Storage          `optional:"true"`
	Declarations []cpdomain.Declaration `optional:"true"`
}

// registerCheckpointWatch makes /readyz list pending checkpoints and
// gate on undeclared ones (see CheckpointWatch).
func registerCheckpointWatch(p checkpointWatchParams) {
	if p.Storage != nil {
		p.Readiness.WatchCheckpoints(platform.CheckpointWatch{Store: p.Storage, Declarations: p.Declarations})
	}
}

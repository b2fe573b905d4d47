package wiring

import (
	"context"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/app/platform"
)

// PeriodicModule provides the scheduler every capability's wiring file
// schedules its periodic job on.
var PeriodicModule = fx.Module("syncd.periodic", fx.Provide(NewPeriodicScheduler))

// NewPeriodicScheduler is the one scheduler of the periodic jobs, on the
// app clock.
func NewPeriodicScheduler(clk platform.Clock, log *zap.Logger) (*periodic.Scheduler, error) {
	return periodic.New(clk.Sleep, log.Named("periodic"))
}

// schedule runs j while the server runs. Its hooks are appended by the
// job's own invoke, after the stores its pass uses opened, so the job
// stops before they close.
func schedule(lc fx.Lifecycle, s *periodic.Scheduler, j periodic.Job) {
	var r *periodic.Running
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { r = s.Start(j); return nil },
		OnStop:  func(ctx context.Context) error { return r.Stop(ctx) },
	})
}

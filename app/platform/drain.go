package platform

import (
	"context"
	"fmt"

	"github.com/syncd-dev/syncd/app/config"
	"go.uber.org/fx"
	"go.uber.org/zap"
)

// drainParams are the inputs of the lame-duck stop.
type drainParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Readiness *Readiness
	Clock     Clock
	Log       *zap.Logger
}

// RegisterDrain is the first stop step (its hook is registered last):
// /readyz turns 503 draining while the listeners keep serving for
// --shutdown-delay, so load balancers stop routing here before the
// listeners close; then the servers' own hooks let in-flight requests
// finish.
func RegisterDrain(p drainParams) {
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

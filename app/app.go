// Package app is syncd's embedding face: Options and Run assemble the
// whole server for a configuration, and the hooks in hooks.go plug a
// host's own rules in. The fx graph itself lives in app/wiring (one file
// per capability) and the process plumbing in app/platform.
package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/zap"
)

// BuildInfo is what the server reports about its own build (the
// syncd_build_info metric, the traces' resource); an embedding program passes
// its own to Options or Run.
type BuildInfo = platform.BuildInfo

// ReadBuildInfo is the running program's build information under version.
func ReadBuildInfo(version string) BuildInfo { return platform.ReadBuildInfo(version) }

// Options is the whole server graph for cfg. extra adds modules (storage,
// authentication, route handlers) and overrides.
func Options(cfg config.Config, info BuildInfo, log *zap.Logger, extra ...fx.Option) fx.Option {
	return fx.Options(
		fx.Supply(cfg, info, log),
		fx.WithLogger(platform.FxLogger),
		fx.StopTimeout(cfg.ShutdownDelay+cfg.ShutdownTimeout),
		// Start hooks connect to the database and create the side stores'
		// tables; on a busy PostgreSQL that can outlast fx's 15 s default,
		// and a slow start beats a refused one (signals are relayed
		// meanwhile; the schema migration itself runs in the readiness
		// phases, not here).
		fx.StartTimeout(startTimeout),
		wiring.ChecksFirst,
		wiring.CoreModule,
		wiring.SchemaModule,
		wiring.PeriodicModule,
		wiring.SocketsModule,
		wiring.EventsModule,
		wiring.TracingModule,
		wiring.AuthModule,
		wiring.CalloutModule,
		wiring.AdminModule,
		wiring.SyncAPIModule,
		wiring.RoundModule,
		wiring.PushModule,
		wiring.PullModule,
		wiring.RetentionModule,
		wiring.LeasesModule,
		wiring.ReactionsModule,
		wiring.RealtimeModule,
		wiring.FanoutModule,
		wiring.SegmentsModule,
		wiring.BlobsModule,
		wiring.OperationsModule,
		wiring.KeysModule,
		wiring.TestControlModule,
		wiring.CheckpointModule,
		wiring.RulesModule,
		fx.Options(extra...),
		fx.Invoke(platform.RegisterBanner),
		fx.Invoke(platform.RegisterDrain),
	)
}

// startTimeout bounds the start hooks (see Options).
const startTimeout = 2 * time.Minute

// Run starts the graph, waits for SIGINT or SIGTERM (or an internal
// shutdown), stops gracefully and returns the process exit code.
func Run(cfg config.Config, info BuildInfo, log *zap.Logger, extra ...fx.Option) int {
	a := fx.New(Options(cfg, info, log, extra...))
	if err := a.Err(); err != nil {
		log.Error("cannot assemble the server", zap.String("error", dig.RootCause(err).Error()))
		toTerminal("cannot start", dig.RootCause(err))
		return 1
	}
	// Signals are relayed from before the start: the listeners serve (and
	// /readyz may answer) while later start hooks still run, and a SIGTERM
	// then must mean a graceful stop, not the default exit.
	done := a.Wait()
	startCtx, cancel := context.WithTimeout(context.Background(), a.StartTimeout())
	defer cancel()
	if err := a.Start(startCtx); err != nil {
		log.Error("cannot start", zap.String("error", dig.RootCause(err).Error()))
		toTerminal("cannot start", dig.RootCause(err))
		return 1
	}
	sig := <-done
	log.Info("shutting down", zap.String("signal", fmt.Sprint(sig.Signal)), zap.Int("exit_code", sig.ExitCode))
	stopCtx, cancelStop := context.WithTimeout(context.Background(), a.StopTimeout())
	defer cancelStop()
	code := sig.ExitCode
	if err := a.Stop(stopCtx); err != nil {
		log.Error("unclean shutdown", zap.Error(err))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// toTerminal repeats a start-up failure as one plain line when standard
// error is a terminal: the JSON log line is for collectors, not for the
// person who just typed the command.
func toTerminal(what string, err error) {
	if st, serr := os.Stderr.Stat(); serr == nil && st.Mode()&os.ModeCharDevice != 0 {
		_, _ = fmt.Fprintf(os.Stderr, "\nsyncd: %s: %v\n", what, err)
	}
}

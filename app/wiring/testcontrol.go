package wiring

import (
	"context"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/testcontrolhttp"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/testcontrol"
)

// TestControlWarning is logged when the test-control plane starts.
const TestControlWarning = "TEST-CONTROL PLANE ENABLED (--test-control-listen): an unauthenticated listener lets any local process create test servers, " +
	"grant itself scopes and move their clocks; it never touches --database, but never run it on a production host"

// TestControlModule serves the conformance test-control plane on
// --test-control-listen. With the flag empty it registers nothing: no
// listener, no route, no instance manager.
var TestControlModule = fx.Module("syncd.testcontrol",
	fx.Invoke(registerTestControl),
)

func registerTestControl(p platform.ServerParams, cfg config.Config) error {
	if cfg.TestControlListen == "" {
		return nil
	}
	log := p.Log.Named("testcontrol")
	m, err := testcontrol.New(testcontrol.Options{
		BaseURL:      func() string { return "http://" + platform.HostPort(p.Listeners.Addr(platform.ServerTestControl)) },
		Log:          log,
		MaxInstances: cfg.TestControlMaxInstances,
		MaxBytes:     cfg.TestControlMaxBytes,
		// Empty: each instance is a SQLite file.
		Database:         cfg.TestControlDatabase,
		DatabaseMaxConns: cfg.TestControlDatabaseMaxConns,
	})
	if err != nil {
		return err
	}
	// Registered before the listener, so it starts before it (on
	// PostgreSQL, the plane's database is open and the schemas of planes
	// gone before are dropped before a create can arrive) and stops after
	// it: instances are closed and their databases deleted once no
	// request can arrive.
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			log.Warn(TestControlWarning, zap.String("addr", cfg.TestControlListen))
			return m.Start(ctx)
		},
		OnStop: func(context.Context) error { return m.Shutdown() },
	})
	platform.RegisterServer(p, platform.ServerTestControl, cfg.TestControlListen, testcontrolhttp.New(m, log))
	return nil
}

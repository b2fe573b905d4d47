package wiring

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/fanout/local"
	natsfanout "github.com/syncd-dev/syncd/adapters/fanout/nats"
	"github.com/syncd-dev/syncd/adapters/fanout/pgnotify"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/ports"
)

// FanoutModule provides ports.Fanout by --fanout: LISTEN/NOTIFY on the
// PostgreSQL --database (auto with a postgres:// database, or postgres),
// core NATS on --nats-url (nats), in process otherwise. The realtime
// module's relay announces every applied commit on it, so a push on any
// node wakes every node's realtime sessions.
var FanoutModule = fx.Module("syncd.fanout",
	fx.Provide(NewFanout),
)

// FanoutParams are the inputs of NewFanout.
type FanoutParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Log       *zap.Logger
	Clock     platform.Clock
	Readiness *platform.Readiness `optional:"true"`
	Metrics   *platform.Metrics   `optional:"true"`
}

// NewFanout builds the configured fanout. The PostgreSQL and NATS ones
// start listening in OnStart (connecting in the background, with backoff)
// and stop in OnStop; neither hook waits for the database or NATS.
func NewFanout(p FanoutParams) (ports.Fanout, error) {
	log := p.Log.Named("fanout")
	mode := p.Config.FanoutMode()
	switch mode {
	case config.FanoutLocal:
		f := local.New(local.Options{Log: log})
		p.Lifecycle.Append(fx.StopHook(f.Close))
		if err := p.Metrics.RegisterFanout(f.Overflows, nil, nil); err != nil {
			return nil, err
		}
		log.Info("fanout in process (one node)")
		return f, nil
	case config.FanoutPostgres:
		kind, dsn, err := config.ParseDatabase(p.Config.Database)
		if err != nil {
			return nil, err
		}
		if kind != config.Postgres {
			return nil, errors.New("--fanout postgres needs a postgres:// --database")
		}
		f, err := pgnotify.New(pgnotify.Options{DSN: dsn, Log: log, Sleep: p.Clock.Sleep})
		if err != nil {
			return nil, err
		}
		p.Lifecycle.Append(fx.Hook{
			OnStart: func(context.Context) error { f.Start(); return nil },
			OnStop:  f.Close,
		})
		if err := p.Metrics.RegisterFanout(f.Overflows, f.Listening, f.Reconnects); err != nil {
			return nil, err
		}
		if p.Readiness != nil {
			// Notices from the other nodes arrive only while the listener is
			// connected: a node without it serves stale sockets.
			p.Readiness.AddCheck(platform.Check{Name: "fanout", Probe: func(context.Context) error {
				if !f.Listening() {
					return errors.New("the LISTEN connection is down")
				}
				return nil
			}, Now: p.Clock.Now})
		}
		log.Info("fanout through PostgreSQL LISTEN/NOTIFY")
		return f, nil
	case config.FanoutNATS:
		f, err := newNATSFanout(p, log)
		if err != nil {
			return nil, err
		}
		log.Info("fanout through NATS")
		return f, nil
	}
	return nil, fmt.Errorf("--fanout %q: want auto, local, postgres or nats", mode)
}

// newNATSFanout builds --fanout nats: its subjects are named after the
// deployment the PostgreSQL --database selects (resolved in the
// background, before the first connection), and it is ready only while
// subscribed, like the LISTEN connection.
func newNATSFanout(p FanoutParams, log *zap.Logger) (*natsfanout.Fanout, error) {
	kind, dsn, err := config.ParseDatabase(p.Config.Database)
	if err != nil {
		return nil, err
	}
	if kind != config.Postgres {
		return nil, errors.New("--fanout nats needs a postgres:// --database")
	}
	n := p.Config.NATS
	f, err := natsfanout.New(natsfanout.Options{
		URL: n.URL, CredentialsFile: n.CredentialsFile,
		TLSCAFile: n.TLSCAFile, TLSCertFile: n.TLSCertFile, TLSKeyFile: n.TLSKeyFile,
		SubjectPrefix: n.SubjectPrefix,
		Deployment:    func(ctx context.Context) (string, error) { return postgres.Deployment(ctx, dsn) },
		Log:           log, Sleep: p.Clock.Sleep,
	})
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { f.Start(); return nil },
		OnStop:  f.Close,
	})
	if err := p.Metrics.RegisterFanout(f.Overflows, f.Listening, f.Reconnects); err != nil {
		return nil, err
	}
	if p.Readiness != nil {
		p.Readiness.AddCheck(platform.Check{Name: "fanout", Probe: func(context.Context) error {
			if !f.Listening() {
				return errors.New("the NATS connection is down")
			}
			return nil
		}, Now: p.Clock.Now})
	}
	return f, nil
}

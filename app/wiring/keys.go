package wiring

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/syncd-dev/syncd/adapters/callout"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/ports"
	"go.uber.org/fx"
	"go.uber.org/zap"
)

// KeysModule reloads the key files without a restart: every
// --key-reload-interval and on SIGHUP it reads --signed-url-key-file,
// --auth-lease-key-file, --jwt-key-file and --callout-key-file again and,
// when one changed and every key in it is usable, swaps the keys in use
// (the newest signs, every key verifies; every callout key signs). A
// file that fails to load keeps the keys in use and is logged at error.
//
// The graph's *KeyReloader is that watcher; Check runs a pass at once.
var KeysModule = fx.Module("syncd.keys",
	fx.Provide(newKeyReloader),
	fx.Invoke(func(*platform.KeyReloader) {}),
)

type keyReloaderParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Log       *zap.Logger
	Metrics   *platform.Metrics
	Clock     platform.Clock
	Signer    *signedurl.Signer   `optional:"true"`
	LeaseKeys *lease.KeySet       `optional:"true"`
	Auth      ports.Authenticator `optional:"true"`
	Callout   *callout.Client     `optional:"true"`
}

// watchKeyFile watches a file of secret keys (platform.ReadKeyFile) and
// hands a changed one to set.
func watchKeyFile(r *platform.KeyReloader, flag, path string, set func(keys ...[]byte) error) {
	r.Watch(flag, path, func() (int, error) {
		keys, err := platform.ReadKeyFile(path)
		if err != nil {
			return 0, err
		}
		return len(keys), set(keys...)
	})
}

func newKeyReloader(p keyReloaderParams) (*platform.KeyReloader, error) {
	r, err := platform.NewKeyReloader(p.Log.Named("keys"), p.Metrics.Registry)
	if err != nil {
		return nil, err
	}
	if f := p.Config.Segments.SignedURLKeyFile; f != "" && p.Signer != nil {
		watchKeyFile(r, "--signed-url-key-file", f, p.Signer.SetKeys)
	}
	if f := p.Config.Leases.KeyFile; f != "" && p.LeaseKeys != nil {
		watchKeyFile(r, "--auth-lease-key-file", f, p.LeaseKeys.SetKeys)
	}
	if f := p.Config.Callout.KeyFile; f != "" && p.Callout != nil {
		watchKeyFile(r, "--callout-key-file", f, p.Callout.SetKeys)
	}
	if rl, ok := p.Auth.(platform.KeyFileReloader); ok && p.Config.JWT.KeyFile != "" {
		r.Watch("--jwt-key-file", p.Config.JWT.KeyFile, rl.ReloadKeyFile)
	}
	if r.Watched() == 0 {
		return r, nil
	}
	stop, done := make(chan struct{}), make(chan struct{})
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			// SIGHUP is caught from here on (its default would end the
			// process).
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			go r.Run(p.Clock, p.Config.KeyReloadInterval, hup, stop, done)
			return nil
		},
		OnStop: func(ctx context.Context) error {
			close(stop)
			select {
			case <-done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	return r, nil
}

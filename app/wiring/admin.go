package wiring

import (
	"errors"
	"net/http"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/admin"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/ports"
)

// newAdminAPI assembles the read-only admin API (app/admin) over the
// graph's storage and segment store; reads the storage or the store
// cannot serve answer 501 or say unavailable.
func newAdminAPI(r *platform.Readiness, log *zap.Logger, a adminParams) http.Handler {
	o := admin.Options{
		Readiness: func() any { return r.Status() },
		Now:       a.Clock.Now,
		Log:       log.Named("adminapi"),
	}
	o.Reader = a.Reader
	if a.Storage != nil {
		o.Logs, o.Clients = a.Storage, a.Storage
		if rl, ok := a.Storage.(ports.ReactionLister); ok {
			o.Reactions = rl
		}
		if ar, ok := a.Storage.(ports.AdminReader); ok && o.Reader == nil {
			o.Reader = ar
		}
	}
	if sr, ok := a.Segments.(ports.SegmentStatsReader); ok {
		o.Segments = sr
	}
	return admin.New(o)
}

// AdminModule serves /livez, /readyz, /metrics and (--pprof) /debug/pprof
// on the admin listener; with --admin-token-file every route but the
// health probes requires that bearer token. --admin-api adds the
// read-only admin API (/admin/v1/...) and refuses to start without the
// token.
var AdminModule = fx.Module("syncd.admin",
	fx.Invoke(func(p platform.ServerParams, cfg config.Config, r *platform.Readiness, m *platform.Metrics, a adminParams) error {
		o := platform.AdminOptions{Pprof: cfg.Admin.Pprof, Refresher: a.Refresher}
		if inv, ok := a.Resolver.(ports.ScopeInvalidator); ok {
			o.Invalidator = inv
		}
		if a.Leases != nil {
			o.Leases = a.Leases
		}
		if cfg.Admin.TokenFile != "" {
			tok, err := platform.ReadAdminToken(cfg.Admin.TokenFile)
			if err != nil {
				return err
			}
			o.Token = tok
		}
		if cfg.Admin.API {
			if o.Token == "" {
				return errors.New("--admin-api requires --admin-token-file")
			}
			o.API = newAdminAPI(r, p.Log, a)
		}
		platform.RegisterServer(p, platform.ServerAdmin, cfg.AdminListen, platform.NewAdminHandler(r, m, p.Log, o))
		return nil
	}),
)

type adminParams struct {
	fx.In
	Refresher ports.ScopeRefresher `optional:"true"`
	// Resolver, when it keeps grants (ports.ScopeInvalidator), has them
	// dropped by the refresh.
	Resolver ports.ScopeResolver `optional:"true"`
	Storage  ports.Storage       `optional:"true"`
	// Reader, when provided, serves the admin lists; otherwise the
	// storage does when it implements ports.AdminReader (a host that
	// wraps its storage provides the reader beside it).
	Reader   ports.AdminReader  `optional:"true"`
	Segments ports.SegmentStore `optional:"true"`
	Leases   *leases.Service    `optional:"true"`
	Clock    ports.Clock
}

package platform

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/syncd-dev/syncd/adapters/auth/dev"
	"github.com/syncd-dev/syncd/app/config"
	"go.uber.org/fx"
	"go.uber.org/zap"
)

// Banner is where development setups print client instructions at start.
type Banner struct{ Out io.Writer }

// bannerParams are the inputs of the startup banner.
type bannerParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Source    SchemaSource
	Listeners *Listeners
	Readiness *Readiness
	Log       *zap.Logger
	Banner    *Banner `optional:"true"`
}

// RegisterBanner logs where the server listens once both listeners are
// bound and prints client instructions for development setups.
func RegisterBanner(p bannerParams) {
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			syncURL := "http://" + HostPort(p.Listeners.Addr(ServerSync)) + p.Config.Mount
			adminURL := "http://" + HostPort(p.Listeners.Addr(ServerAdmin))
			kind, _, _ := config.ParseDatabase(p.Config.Database)
			p.Log.Info("syncd started",
				zap.String("sync_url", syncURL+"/sync"),
				zap.String("realtime_url", "ws"+strings.TrimPrefix(syncURL, "http")+"/realtime"),
				zap.String("admin_url", adminURL),
				zap.String("schema", p.Source.Name),
				zap.String("database_kind", string(kind)),
				zap.String("database", p.Config.Redacted().Database),
				zap.String("auth", p.Config.Auth))
			if p.Config.Auth == config.AuthDev {
				p.Log.Warn(dev.Warning)
			}
			if p.Banner != nil && p.Banner.Out != nil && (p.Config.Dev || p.Config.DemoSchema()) {
				_, _ = fmt.Fprintf(p.Banner.Out, `
syncd is listening.
  sync API:   %[1]s/sync   (POST, SSP2 %[6]s)
  realtime:   ws%[2]s/realtime
  admin:      %[3]s/readyz  %[3]s/metrics
  schema:     %[4]s
  database:   %[5]s

Point a Syncular client at base URL %[1]s`, syncURL, strings.TrimPrefix(syncURL, "http"), adminURL,
					p.Source.Name, p.Config.Redacted().Database, wireVersions(p.Config))
				if origins := p.Config.HTTP.CORSOriginList(); len(origins) > 0 {
					_, _ = fmt.Fprintf(p.Banner.Out, "\nBrowser apps may call it from: %s", strings.Join(origins, ", "))
				}
				if p.Config.Auth == config.AuthDev {
					_, _ = fmt.Fprintf(p.Banner.Out, `
Development authentication: send header %s: <user id> (optional %s, %s).`, dev.HeaderActor, dev.HeaderPartition, dev.HeaderScopes)
					if a := p.Config.DevAuth.Actor; a != "" {
						_, _ = fmt.Fprintf(p.Banner.Out, "\nRequests without it act as %q (--dev-actor).", a)
					}
					_, _ = fmt.Fprint(p.Banner.Out, "\nNever expose this server to untrusted clients in this mode.")
				}
				_, _ = fmt.Fprintf(p.Banner.Out, "\nTry: curl -s %s/readyz\n\n", adminURL)
			}
			return nil
		},
	})
}

// wireVersions names the admitted wire versions for the banner.
func wireVersions(c config.Config) string {
	switch c.Round.MinWireVersion {
	case 1:
		return "wire 3, 2 and 1"
	case 2:
		return "wire 3 and 2"
	}
	return "wire 3"
}

func HostPort(a net.Addr) string {
	if a == nil {
		return "unbound"
	}
	return a.String()
}

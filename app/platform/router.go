package platform

import (
	"fmt"
	"net/http"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/ports"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/zap"
)

// RouteHandler serves one sync API route. Provide it into the value group
// "syncd.routes" to replace the route's sync.not_found answer:
//
//	fx.Provide(fx.Annotate(newSyncRoute, fx.ResultTags(`group:"syncd.routes"`)))
type RouteHandler struct {
	Route   httpapi.Route
	Handler http.Handler
}

// RouterParams are the inputs of the sync API router.
type RouterParams struct {
	fx.In
	Config    config.Config
	Readiness *Readiness
	Metrics   *Metrics
	Log       *zap.Logger
	Clock     ports.Clock
	Routes    []RouteHandler       `group:"syncd.routes"`
	Tracer    trace.TracerProvider `optional:"true"`
}

// NewRouter builds the sync API router: the configured mount, the
// readiness gate, and the provided route handlers (others answer 404).
func NewRouter(p RouterParams) (*httpapi.Router, error) {
	handlers := map[httpapi.Route]http.Handler{}
	for _, rh := range p.Routes {
		if _, dup := handlers[rh.Route]; dup {
			return nil, fmt.Errorf("route %q provided twice", rh.Route)
		}
		handlers[rh.Route] = rh.Handler
	}
	return httpapi.New(httpapi.Options{
		Mount:    p.Config.Mount,
		Gate:     p.Readiness,
		Handlers: handlers,
		Logger:   p.Log.Named("syncapi"),
		Observe:  p.Metrics.ObserveHTTP,
		InFlight: p.Metrics.InFlightHTTP,
		Now:      p.Clock.Now,
		CORS:     CORSOptions(p.Config),
		Tracer:   TracingOn(p.Tracer),
		AccessLog: func() *zap.Logger {
			if p.Config.HTTP.AccessLog {
				return p.Log.Named("access")
			}
			return nil
		}(),
	})
}

// CORSOptions are the configured CORS origins and headers.
func CORSOptions(c config.Config) httpapi.CORSOptions {
	return httpapi.CORSOptions{Origins: c.HTTP.CORSOriginList(), ExtraHeaders: c.HTTP.CORSHeaderList()}
}

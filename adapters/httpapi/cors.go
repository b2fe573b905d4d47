package httpapi

import (
	"net/http"
	"time"

	"github.com/rs/cors"
	"go.uber.org/zap"
)

// CORSOptions configure cross-origin access for browser apps served from
// another origin. Credentials are headers (Authorization, the development
// identity headers), never cookies, so credentialed CORS is not offered.
type CORSOptions struct {
	// Origins are the allowed origins, exact ("https://app.example.com"),
	// or the single entry "*" for any. Empty turns CORS off.
	Origins []string
	// ExtraHeaders are request headers allowed besides the ones clients
	// of the sync API send (AllowedRequestHeaders).
	ExtraHeaders []string
	// MaxAge is how long a browser may cache a preflight answer (0 → 10 min).
	MaxAge time.Duration
}

// AllowedRequestHeaders are the request headers the sync API's clients
// send: credentials, the encodings, the segment scopes (SPEC §5.5), the
// development identity, request ids and trace context.
var AllowedRequestHeaders = []string{
	"Authorization", "Content-Type", "Content-Encoding", "Accept", "Accept-Encoding", "If-None-Match",
	"X-Syncular-Scopes", "X-Syncd-Actor", "X-Syncd-Partition", "X-Syncd-Scopes",
	RequestIDHeader, "Traceparent", "Tracestate",
}

// ExposedResponseHeaders are the response headers a browser client reads
// beyond the CORS-safelisted ones.
var ExposedResponseHeaders = []string{"ETag", "Retry-After", "Content-Encoding", "Content-Range", "Allow", "Vary", RequestIDHeader}

// corsMethods are the sync API's methods (SPEC §1.1, §5.5, §5.9).
var corsMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut}

// Enabled says whether any origin is allowed.
func (o CORSOptions) Enabled() bool { return len(o.Origins) > 0 }

// AnyOrigin says whether every origin is allowed.
func (o CORSOptions) AnyOrigin() bool {
	for _, s := range o.Origins {
		if s == "*" {
			return true
		}
	}
	return false
}

// OriginPatterns are the origins as the realtime upgrade's origin check
// takes them (scheme://host); nil when any origin is allowed.
func (o CORSOptions) OriginPatterns() []string {
	if !o.Enabled() || o.AnyOrigin() {
		return nil
	}
	return append([]string(nil), o.Origins...)
}

// withCORS answers preflight requests itself, before any route,
// authentication or readiness gate, and adds the CORS headers to every
// answer to an allowed origin.
func withCORS(o CORSOptions, h http.Handler) http.Handler {
	if !o.Enabled() {
		return h
	}
	maxAge := o.MaxAge
	if maxAge == 0 {
		maxAge = 10 * time.Minute
	}
	c := cors.New(cors.Options{
		AllowedOrigins:   o.Origins,
		AllowedMethods:   corsMethods,
		AllowedHeaders:   append(append([]string(nil), AllowedRequestHeaders...), o.ExtraHeaders...),
		ExposedHeaders:   ExposedResponseHeaders,
		MaxAge:           int(maxAge / time.Second),
		AllowCredentials: false,
	})
	return c.Handler(h)
}

// RoutePreflight is the access log's route of a CORS preflight.
const RoutePreflight = "preflight"

// logPreflights writes the access log line of each CORS preflight, which
// the CORS handler answers before any route. A refused one would
// otherwise leave no trace here while the browser only tells its own
// console: the line names the origin, the method and headers asked for,
// and whether they were allowed.
func (r *Router) logPreflights(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodOptions || req.Header.Get("Origin") == "" || req.Header.Get("Access-Control-Request-Method") == "" {
			h.ServeHTTP(w, req)
			return
		}
		start := r.now()
		id := requestID(req)
		w.Header().Set(RequestIDHeader, id)
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, req)
		if ce := r.access.Check(zap.InfoLevel, "request"); ce != nil {
			ce.Write(zap.String("method", req.Method), zap.String("path", req.URL.Path), zap.String("route", RoutePreflight),
				zap.Int("status", sw.status()), zap.String("request_id", id),
				zap.String("origin", clip(req.Header.Get("Origin"))),
				zap.String("request_method", clip(req.Header.Get("Access-Control-Request-Method"))),
				zap.String("request_headers", clip(req.Header.Get("Access-Control-Request-Headers"))),
				zap.Bool("cors_allowed", sw.Header().Get("Access-Control-Allow-Origin") != ""),
				zap.Duration("elapsed", r.now().Sub(start)))
		}
	})
}

// clip bounds a logged header value: any page can send a preflight.
func clip(v string) string {
	const most = 256
	if len(v) > most {
		return v[:most] + "…"
	}
	return v
}

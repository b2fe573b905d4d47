package httpapi

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Route is one sync API route: a method and a path relative to the mount
// prefix, in net/http pattern syntax.
type Route string

// The sync API routes (SPEC §1.1, §5.5, §5.9, §8.1).
const (
	RouteSync            Route = "POST /sync"
	RouteSegment         Route = "GET /segments/{" + PathSegmentID + "}"
	RouteBlobPut         Route = "PUT /blobs/{" + PathBlobID + "}"
	RouteBlobGet         Route = "GET /blobs/{" + PathBlobID + "}"
	RouteBlobUploadGrant Route = "POST /blobs/{" + PathBlobID + "}/upload-grant"
	RouteRealtime        Route = "GET /realtime"
	// RouteOperations runs registered remote operations (REMOTE.md §5).
	RouteOperations Route = "POST /operations"
	// RouteOperationsRealtime serves live query watches (REMOTE.md §6).
	RouteOperationsRealtime Route = "GET /operations/realtime"
	// The native presigned blob URLs (SPEC §5.9.3, §5.9.5): the query is
	// the grant, no host authentication.
	RouteBlobObjectGet Route = "GET " + signedurl.BlobObjectPath + "{" + PathBlobID + "}"
	RouteBlobObjectPut Route = "PUT " + signedurl.BlobObjectPath + "{" + PathBlobID + "}"
)

// Path wildcards, read with (*http.Request).PathValue.
const (
	PathSegmentID = "segmentId"
	PathBlobID    = "blobId"
)

// Routes lists every sync API route.
func Routes() []Route {
	return []Route{RouteSync, RouteSegment, RouteBlobPut, RouteBlobGet, RouteBlobUploadGrant, RouteRealtime, RouteOperations, RouteOperationsRealtime, RouteBlobObjectGet, RouteBlobObjectPut}
}

// Method returns the route's HTTP method.
func (r Route) Method() string { m, _, _ := strings.Cut(string(r), " "); return m }

// Path returns the route's path below the mount prefix.
func (r Route) Path() string { _, p, _ := strings.Cut(string(r), " "); return p }

// Gate decides whether the sync API may serve. ServeError returns nil when
// it may, or the error to answer (sync.schema_not_ready while the server
// is starting or draining).
type Gate interface {
	ServeError() error
}

// RequestStats describe one answered request for metrics.
type RequestStats struct {
	// Route is "" when no route matched.
	Route  Route
	Method string
	Status int
	// Code is the catalog code of an error answer ("" otherwise).
	Code              syncerr.Code
	Elapsed           time.Duration
	BytesIn, BytesOut int64
}

// ObserveFunc records one answered request.
type ObserveFunc func(RequestStats)

// Options configure a Router.
type Options struct {
	// Mount is the route prefix: "" or "/path" without a trailing slash.
	Mount string
	// Gate, when set, runs before every route handler.
	Gate Gate
	// Handlers serve routes; a route without one (its feature is not
	// built or not configured) answers sync.not_found (404).
	Handlers map[Route]http.Handler
	// Logger logs failures; nil discards.
	Logger *zap.Logger
	// Observe, when set, is called after every request.
	Observe ObserveFunc
	// InFlight, when set, is called with +1 as a request begins and -1 as
	// it ends.
	InFlight func(delta int)
	// Now is the clock that times requests (default time.Now).
	Now func() time.Time
	// AccessLog, when set, gets one info line per request.
	AccessLog *zap.Logger
	// CORS, when it allows an origin, answers preflights before any route.
	CORS CORSOptions
	// Tracer, when set, puts every request in a server span (tracing.go),
	// continuing the trace its headers carry through Propagator (default
	// W3C trace context and baggage).
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
}

// Router serves the sync API.
type Router struct {
	mux      *http.ServeMux
	h        http.Handler // mux behind CORS
	mount    string
	log      *zap.Logger
	access   *zap.Logger
	observe  ObserveFunc
	inflight func(int)
	now      func() time.Time

	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

// ValidateMount checks a mount prefix.
func ValidateMount(m string) error {
	if m == "" {
		return nil
	}
	if !strings.HasPrefix(m, "/") || strings.HasSuffix(m, "/") || strings.ContainsAny(m, " {}?#\t\n") {
		return fmt.Errorf("httpapi: mount %q: want empty or /path without a trailing slash", m)
	}
	return nil
}

// New builds the router.
func New(opts Options) (*Router, error) {
	if err := ValidateMount(opts.Mount); err != nil {
		return nil, err
	}
	for route := range opts.Handlers {
		if !known(route) {
			return nil, fmt.Errorf("httpapi: unknown route %q", route)
		}
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	r := &Router{mux: http.NewServeMux(), mount: opts.Mount, log: log, access: opts.AccessLog, observe: opts.Observe, inflight: opts.InFlight, now: opts.Now}
	if r.now == nil {
		r.now = time.Now
	}
	if r.access == nil {
		r.access = zap.NewNop()
	}
	if opts.Tracer != nil {
		r.tracer, r.propagator = opts.Tracer.Tracer(tracerName), opts.Propagator
		if r.propagator == nil {
			r.propagator = DefaultPropagator()
		}
	}
	r.h = withCORS(opts.CORS, r.mux)
	if opts.CORS.Enabled() {
		r.h = r.logPreflights(r.h)
	}
	for _, route := range Routes() {
		h := opts.Handlers[route]
		if h == nil {
			h = absent(route)
		}
		r.mux.Handle(route.Method()+" "+opts.Mount+route.Path(), r.wrap(route, opts.Gate, h))
	}
	// A known path under another method is 405 with Allow, not 404: a
	// method-less pattern is less specific than the method ones above.
	allowed := map[string][]string{}
	var paths []string
	for _, route := range Routes() {
		p := opts.Mount + route.Path()
		if allowed[p] == nil {
			paths = append(paths, p)
		}
		allowed[p] = append(allowed[p], route.Method())
	}
	for _, p := range paths {
		allow := strings.Join(allowed[p], ", ")
		r.mux.Handle(p, r.wrap("", nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", allow)
			WriteTransportError(w, &StatusError{Status: http.StatusMethodNotAllowed,
				Err: syncerr.New(syncerr.InvalidRequest).WithMessage("method not allowed; allowed: " + allow)})
		})))
	}
	r.mux.Handle("/", r.wrap("", nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteError(w, syncerr.New(syncerr.NotFound).WithMessage("no such route"))
	})))
	return r, nil
}

func known(route Route) bool {
	for _, r := range Routes() {
		if r == route {
			return true
		}
	}
	return false
}

// Mount returns the route prefix.
func (r *Router) Mount() string { return r.mount }

// ServeHTTP dispatches to the route handlers.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.h.ServeHTTP(w, req) }

// absent answers a route whose feature this server does not offer. The
// catalog is closed (SPEC §10.3), so it is the catalog's "unknown sync
// resource", sync.not_found, never a code of the server's own.
func absent(route Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteError(w, syncerr.New(syncerr.NotFound).
			WithMessage("this server does not offer this route").
			WithDetails(map[string]string{"route": string(route)}))
	})
}

func (r *Router) wrap(route Route, gate Gate, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := r.now()
		id := requestID(req)
		w.Header().Set(RequestIDHeader, id)
		info := &requestInfo{}
		req = req.WithContext(withRequestInfo(ports.WithRequestID(req.Context(), id), info))
		var body *countingBody
		if req.Body != nil && req.Body != http.NoBody {
			body = &countingBody{ReadCloser: req.Body}
			req.Body = body
		}
		sw := &statusWriter{ResponseWriter: w}
		req, span := r.startSpan(req, route, id)
		defer span.end(sw, info)
		if r.inflight != nil {
			r.inflight(1)
		}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				r.log.Error("sync api handler panicked", zap.String("route", string(route)), zap.String("request_id", id), zap.Any("panic", p), zap.Stack("stack"))
				if !sw.wrote {
					WriteError(sw, syncerr.Newf(syncerr.InternalError, "panic: %v", p))
				}
			}
			elapsed := r.now().Sub(start)
			if r.inflight != nil {
				r.inflight(-1)
			}
			if r.observe != nil {
				st := RequestStats{Route: route, Method: req.Method, Status: sw.status(), Code: sw.errCode, Elapsed: elapsed, BytesOut: sw.bytes}
				if body != nil {
					st.BytesIn = body.n
				}
				r.observe(st)
			}
			if ce := r.access.Check(zap.InfoLevel, "request"); ce != nil {
				ce.Write(append(accessFields(req, route, sw, info, body, id), zap.Duration("elapsed", elapsed))...)
			}
		}()
		if gate != nil {
			if err := gate.ServeError(); err != nil {
				WriteError(sw, err)
				return
			}
		}
		h.ServeHTTP(sw, req)
	})
}

// statusWriter records the status code and keeps Flush and Hijack (the
// realtime upgrade) reachable.
type statusWriter struct {
	http.ResponseWriter
	code    int
	wrote   bool
	bytes   int64
	errCode syncerr.Code // the catalog code answered, for the access log
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.code, s.wrote = http.StatusOK, true
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

func (s *statusWriter) status() int {
	if !s.wrote {
		return http.StatusOK
	}
	return s.code
}

// Flush implements http.Flusher.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		if !s.wrote {
			s.code, s.wrote = http.StatusOK, true
		}
		f.Flush()
	}
}

// Hijack implements http.Hijacker for WebSocket upgrades.
func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("httpapi: response writer cannot hijack")
	}
	if !s.wrote {
		s.code, s.wrote = http.StatusSwitchingProtocols, true
	}
	return hj.Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

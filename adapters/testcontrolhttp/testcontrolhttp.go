// Package testcontrolhttp is the HTTP face of the conformance test-control
// plane (syncd serve --test-control-listen): JSON control routes that
// create, drive and close test instances, and the instances' own sync API
// under /i/{id}. It only routes and encodes; the plane itself (instances,
// their storage and control methods) is a use case behind Plane.
//
//	GET    /control/capabilities       → {capabilities, methods, wireVersions}
//	POST   /control/instances          → {id} | 422 {unsupported}
//	POST   /control/instances/{id}/call {method, args} → {result} | 501 {unsupported} | 500 {error}
//	DELETE /control/instances/{id}     → {} (idempotent)
//	*      /i/{id}/...                 → the instance's sync API routes
//
// The listener is loopback only and unauthenticated, so it serves only
// what a local harness sends: a request whose Host is not a loopback
// address (a DNS-rebinding name), whose Origin is not a loopback origin,
// or that a browser marks Sec-Fetch-Site: cross-site is refused with 403
// on every route, WebSocket upgrades included; the JSON control POSTs
// take only Content-Type application/json (415 otherwise), which no
// cross-site form or text/plain request can send without a preflight.
package testcontrolhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Capabilities is the answer of GET /control/capabilities.
type Capabilities struct {
	Capabilities []string `json:"capabilities"`
	Methods      []string `json:"methods"`
	WireVersions []int    `json:"wireVersions"`
}

// Plane is the test-control use case.
type Plane interface {
	Capabilities() Capabilities
	// Create builds an instance from a create body and returns its id once
	// it serves.
	Create(ctx context.Context, body []byte) (string, error)
	// Call runs a control method on an instance.
	Call(ctx context.Context, id, method string, args []json.RawMessage) (any, error)
	// Close closes an instance and deletes its storage; closing an unknown
	// or closed instance is not an error.
	Close(ctx context.Context, id string) error
	// Instance returns the sync API handler of an instance, its routes
	// relative to /i/{id}.
	Instance(id string) (http.Handler, bool)
}

// Unsupported is implemented by errors that name an option or method the
// build cannot honour: a create answers 422 {"unsupported": what}, a call
// 501 {"unsupported": what}.
type Unsupported interface {
	error
	Unsupported() string
}

// ErrNoInstance is returned for an unknown instance id (404).
var ErrNoInstance = errors.New("no such instance")

// MaxControlBodyBytes bounds a control request body.
const MaxControlBodyBytes = 16 << 20

// New returns the plane's handler.
func New(p Plane, log *zap.Logger) http.Handler {
	if log == nil {
		log = zap.NewNop()
	}
	h := &handler{p: p, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /control/capabilities", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, p.Capabilities())
	})
	mux.HandleFunc("POST /control/instances", h.create)
	mux.HandleFunc("POST /control/instances/{id}/call", h.call)
	mux.HandleFunc("DELETE /control/instances/{id}", h.close)
	mux.HandleFunc("/i/{id}/", h.instance)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteError(w, syncerr.New(syncerr.NotFound).WithMessage("no such route"))
	})
	return localOnly(mux)
}

// localOnly refuses every request a web page could have sent (see the
// package comment) before any route runs.
func localOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := foreign(r); why != "" {
			refuse(w, r, http.StatusForbidden, syncerr.Forbidden, why)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// foreign names why r cannot come from a local harness, or is "".
func foreign(r *http.Request) string {
	if !LoopbackHost(r.Host) {
		return fmt.Sprintf("the test-control plane serves only loopback hosts (127.0.0.1, [::1], localhost), not Host %q", r.Host)
	}
	for _, o := range r.Header.Values("Origin") {
		if !LoopbackOrigin(o) {
			return fmt.Sprintf("the test-control plane serves no web page: Origin %q is not a loopback origin", o)
		}
	}
	for _, s := range r.Header.Values("Sec-Fetch-Site") {
		if strings.EqualFold(strings.TrimSpace(s), "cross-site") {
			return "the test-control plane serves no web page: the request is cross-site (Sec-Fetch-Site)"
		}
	}
	return ""
}

// LoopbackHost reports whether a Host header value (host or host:port)
// names a loopback address literally: 127.0.0.1, ::1 (bracketed with a
// port) or localhost. A name that merely resolves to one is refused: it
// is what a DNS-rebinding page reaches the listener through.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	switch strings.ToLower(host) {
	case "127.0.0.1", "::1", "localhost":
		return true
	}
	return false
}

// LoopbackOrigin reports whether an Origin header value is an http or
// https origin on a loopback host ("null", the origin of sandboxed and
// file pages, is not).
func LoopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	return LoopbackHost(u.Host)
}

// requireJSON refuses a control POST whose body is not declared JSON.
func requireJSON(w http.ResponseWriter, r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == httpapi.ContentTypeJSON {
		return true
	}
	refuse(w, r, http.StatusUnsupportedMediaType, syncerr.InvalidRequest,
		fmt.Sprintf("the control routes take Content-Type %s, not %q", httpapi.ContentTypeJSON, r.Header.Get("Content-Type")))
	return false
}

// refuse answers a refusal in the shape of the route: the control routes'
// {"error", "code"}, the instance routes' SPEC §10.1 body.
func refuse(w http.ResponseWriter, r *http.Request, status int, code syncerr.Code, msg string) {
	if strings.HasPrefix(r.URL.Path, "/control/") {
		writeJSON(w, status, map[string]string{"error": msg, "code": string(code)})
		return
	}
	httpapi.WriteTransportError(w, &httpapi.StatusError{Status: status, Err: syncerr.New(code).WithMessage(msg)})
}

type handler struct {
	p   Plane
	log *zap.Logger
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	if !requireJSON(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxControlBodyBytes))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "read body: " + err.Error()})
		return
	}
	id, err := h.p.Create(r.Context(), body)
	var se *syncerr.Error
	if errors.As(err, &se) && syncerr.Lookup(se.Code).Exposed {
		// A refusal of the plane's own (too many instances): its
		// catalog status, so a harness can tell it from a bad body.
		writeJSON(w, se.HTTPStatus(), map[string]string{"error": se.Body().Message, "code": string(se.Code)})
		return
	}
	if err != nil {
		h.fail(w, "create", http.StatusUnprocessableEntity, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id})
}

type callBody struct {
	Method string            `json:"method"`
	Args   []json.RawMessage `json:"args"`
}

func (h *handler) call(w http.ResponseWriter, r *http.Request) {
	if !requireJSON(w, r) {
		return
	}
	var c callBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxControlBodyBytes))
	if err := dec.Decode(&c); err != nil || c.Method == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"method\": str, \"args\": [...]}"})
		return
	}
	res, err := h.p.Call(r.Context(), r.PathValue("id"), c.Method, c.Args)
	if err != nil {
		h.fail(w, c.Method, http.StatusNotImplemented, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": res})
}

func (h *handler) close(w http.ResponseWriter, r *http.Request) {
	if err := h.p.Close(r.Context(), r.PathValue("id")); err != nil {
		h.fail(w, "close", http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (h *handler) instance(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	inst, ok := h.p.Instance(id)
	if !ok {
		httpapi.WriteError(w, syncerr.New(syncerr.NotFound).WithMessage("no such test instance"))
		return
	}
	http.StripPrefix("/i/"+id, inst).ServeHTTP(w, r)
}

// fail answers an error: unsupportedStatus with {"unsupported"} for an
// Unsupported error, 404 for an unknown instance, 500 {"error"} otherwise.
func (h *handler) fail(w http.ResponseWriter, what string, unsupportedStatus int, err error) {
	var u Unsupported
	switch {
	case errors.As(err, &u):
		writeJSON(w, unsupportedStatus, map[string]string{"unsupported": u.Unsupported()})
	case errors.Is(err, ErrNoInstance):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	default:
		h.log.Debug("test-control "+what+" failed", zap.Error(err))
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": strings.TrimSpace(err.Error())})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode result"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

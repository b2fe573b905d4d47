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
package testcontrolhttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
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
	return mux
}

type handler struct {
	p   Plane
	log *zap.Logger
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxControlBodyBytes))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "read body: " + err.Error()})
		return
	}
	id, err := h.p.Create(r.Context(), body)
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

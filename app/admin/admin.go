// Package admin is the read-only admin API (/admin/v1/...): partitions,
// client records, commit metadata, reaction queue counts and lists, segment store
// totals and readiness detail, as JSON for operators. It never reads row
// payloads and never writes. The admin listener mounts it only behind the
// bearer token (platform.NewAdminHandler, --admin-api).
package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/ports"
)

// Page size bounds of every list.
const (
	DefaultLimit = 50
	MaxLimit     = 500
	// maxNameBytes bounds a partition or client id in a query (ids are
	// far shorter; a longer value cannot name anything).
	maxNameBytes = 1024
)

// Options configure the admin API.
type Options struct {
	// Reader serves the lists; nil (a storage without ports.AdminReader)
	// answers 501 on those routes.
	Reader ports.AdminReader
	// Logs give a partition's max seq (a client's lag); nil leaves it out.
	Logs ports.LogReader
	// Clients serve the single-client route; nil answers 501 there.
	Clients ports.ClientStore
	// Reactions serve the reaction list; nil answers 501 there.
	Reactions ports.ReactionLister
	// Segments report the segment store's totals; nil says unavailable.
	Segments ports.SegmentStatsReader
	// Readiness returns the /readyz document (any JSON value).
	Readiness func() any
	// Now is the clock (publication expiry in the segment totals).
	Now func() time.Time
	Log *zap.Logger
}

// Handler serves GET /admin/v1/... .
type Handler struct {
	o   Options
	mux *http.ServeMux
}

// New returns the admin API handler.
func New(o Options) *Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	h := &Handler{o: o, mux: http.NewServeMux()}
	h.route("/admin/v1/partitions", []string{"limit", "cursor"}, h.partitions)
	h.route("/admin/v1/clients", []string{"partition", "limit", "cursor"}, h.clients)
	h.route("/admin/v1/client", []string{"partition", "clientId"}, h.client)
	h.route("/admin/v1/commits", []string{"partition", "after", "through", "limit"}, h.commits)
	h.route("/admin/v1/reactions", []string{"partition"}, h.reactions)
	h.route("/admin/v1/reactions/list", []string{"partition", "status", "type", "limit", "cursor"}, h.reactionList)
	h.route("/admin/v1/segments", nil, h.segments)
	h.route("/admin/v1/readiness", nil, h.readiness)
	h.mux.HandleFunc("/admin/v1/", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusNotFound, errorBody{Error: "not found"})
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// badRequest is a query parameter the API refuses (400, never 500).
type badRequest struct{ param, msg string }

func (e *badRequest) Error() string { return e.param + ": " + e.msg }

// errUnsupported is a route the configured storage cannot serve (501).
var errUnsupported = errors.New("the storage does not support this admin read")

// errNotFound is a named record that does not exist (404).
var errNotFound = errors.New("not found")

type errorBody struct {
	Error string `json:"error"`
	Param string `json:"param,omitempty"`
}

// route registers a GET route whose query may hold only the allowed
// parameters, each at most once.
func (h *Handler) route(path string, allowed []string, fn func(ctx context.Context, q url.Values) (any, error)) {
	h.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			WriteJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method not allowed"})
			return
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			WriteJSON(w, http.StatusBadRequest, errorBody{Error: "malformed query string"})
			return
		}
		if err := checkParams(q, allowed); err != nil {
			h.fail(w, err)
			return
		}
		v, err := fn(r.Context(), q)
		if err != nil {
			h.fail(w, err)
			return
		}
		WriteJSON(w, http.StatusOK, v)
	})
}

func checkParams(q url.Values, allowed []string) error {
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return &badRequest{k, "unknown parameter"}
		}
		if len(vs) > 1 {
			return &badRequest{k, "given more than once"}
		}
	}
	return nil
}

func (h *Handler) fail(w http.ResponseWriter, err error) {
	var br *badRequest
	switch {
	case errors.As(err, &br):
		WriteJSON(w, http.StatusBadRequest, errorBody{Error: br.msg, Param: br.param})
	case errors.Is(err, errNotFound):
		WriteJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case errors.Is(err, errUnsupported):
		WriteJSON(w, http.StatusNotImplemented, errorBody{Error: err.Error()})
	case errors.Is(err, context.Canceled):
		// The operator went away; nobody reads the answer.
	default:
		h.o.Log.Error("admin read failed", zap.Error(err))
		WriteJSON(w, http.StatusInternalServerError, errorBody{Error: "internal error"})
	}
}

// WriteJSON answers v as JSON with code, never cached; the admin
// listener's own endpoints answer the same way.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// ---- parameters ----

func limitParam(q url.Values) (int, error) {
	s := q.Get("limit")
	if s == "" {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxLimit {
		return 0, &badRequest{"limit", fmt.Sprintf("want an integer from 1 to %d", MaxLimit)}
	}
	return n, nil
}

func seqParam(q url.Values, name string) (int64, error) {
	s := q.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, &badRequest{name, "want a commit seq (an integer ≥ 0)"}
	}
	return n, nil
}

func nameParam(q url.Values, name string) (string, error) {
	s := q.Get(name)
	if s == "" {
		return "", &badRequest{name, "required"}
	}
	if len(s) > maxNameBytes {
		return "", &badRequest{name, fmt.Sprintf("longer than %d bytes", maxNameBytes)}
	}
	return s, nil
}

// Cursors are opaque to clients: the base64url of the last name listed.
func encodeCursor(last string) *string {
	c := base64.RawURLEncoding.EncodeToString([]byte(last))
	return &c
}

func cursorParam(q url.Values) (string, error) {
	s := q.Get("cursor")
	if s == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 || len(b) > maxNameBytes {
		return "", &badRequest{"cursor", "not a cursor this API returned"}
	}
	return string(b), nil
}

// timeOf renders a millisecond stamp as RFC 3339 UTC; 0 is null.
func timeOf(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	return &s
}

package platform

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"

	"github.com/syncd-dev/syncd/app/admin"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/ports"
)

// AdminOptions configure the admin handler.
type AdminOptions struct {
	// Token, when set, is the bearer token every route except the health
	// probes requires: orchestrator probes cannot send one, and /livez and
	// /readyz reveal nothing but the phase, while /metrics and pprof
	// expose the process.
	Token string
	// Pprof serves /debug/pprof.
	Pprof bool
	// Refresher, when set, serves POST /admin/realtime/refresh-scopes.
	Refresher ports.ScopeRefresher
	// Invalidator, when set, drops the resolver's kept grants of the
	// refreshed actor (or partition) first, so the refresh asks the
	// grant source.
	Invalidator ports.ScopeInvalidator
	// Leases, when set, serves POST /admin/leases/revoke.
	Leases LeaseRevoker
	// API, when set together with Token, serves the read-only admin API
	// under /admin/v1/ (app/admin). Without a token it is never mounted.
	API http.Handler
}

// LeaseRevoker revokes auth leases (*leases.Service).
type LeaseRevoker interface {
	Revoke(ctx context.Context, partition, leaseID string) (found bool, err error)
}

// maxAdminBodyBytes bounds an admin request body.
const maxAdminBodyBytes = 64 << 10

// NewAdminHandler serves the admin listener: /livez (the process answers),
// /readyz (the readiness document; 503 until ready), /metrics (Prometheus)
// and, with o.Pprof, /debug/pprof; with o.Refresher, POST
// /admin/realtime/refresh-scopes re-resolves the realtime sessions of a
// partition ({"partition": …, "actorId": … optional}; answers
// {"sessions": n}), after dropping what o.Invalidator keeps of them; with o.Leases, POST /admin/leases/revoke revokes an
// auth lease ({"partition": …, "leaseId": …}; answers {"revoked": true,
// "found": whether a stored lease carried the id}); with o.API and
// o.Token, the admin API under
// /admin/v1/. It is never mounted on the sync API listener.
func NewAdminHandler(r *Readiness, m *Metrics, log *zap.Logger, o AdminOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		st := r.Status()
		code := http.StatusOK
		if !st.Ready {
			code = http.StatusServiceUnavailable
		}
		admin.WriteJSON(w, code, st)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		Registry: m.Registry,
		ErrorLog: zap.NewStdLog(log.Named("metrics")),
	}))
	if o.Refresher != nil {
		mux.HandleFunc("POST /admin/realtime/refresh-scopes", func(w http.ResponseWriter, req *http.Request) {
			var in struct {
				Partition string `json:"partition"`
				ActorID   string `json:"actorId"`
			}
			dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxAdminBodyBytes))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil || in.Partition == "" {
				admin.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"partition": "<partition>", "actorId": "<actor, optional>"}`})
				return
			}
			if o.Invalidator != nil {
				o.Invalidator.InvalidateScopes(in.Partition, in.ActorID)
			}
			n := o.Refresher.RefreshScopes(req.Context(), in.Partition, in.ActorID)
			admin.WriteJSON(w, http.StatusOK, map[string]int{"sessions": n})
		})
	}
	if o.Leases != nil {
		mux.HandleFunc("POST /admin/leases/revoke", func(w http.ResponseWriter, req *http.Request) {
			var in struct {
				Partition string `json:"partition"`
				LeaseID   string `json:"leaseId"`
			}
			dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxAdminBodyBytes))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil || in.Partition == "" || in.LeaseID == "" {
				admin.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"partition": "<partition>", "leaseId": "<lease id>"}`})
				return
			}
			found, err := o.Leases.Revoke(req.Context(), in.Partition, in.LeaseID)
			if err != nil {
				log.Error("auth lease revocation failed", zap.String("partition", in.Partition), zap.Error(err))
				admin.WriteJSON(w, http.StatusInternalServerError, map[string]string{"error": "revocation failed; see the server log"})
				return
			}
			admin.WriteJSON(w, http.StatusOK, map[string]bool{"revoked": true, "found": found})
		})
	}
	if o.API != nil && o.Token != "" {
		mux.Handle("/admin/v1/", o.API)
	}
	if o.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	})
	if o.Token == "" {
		return mux
	}
	return requireAdminToken(mux, o.Token)
}

// requireAdminToken answers 401 to any request but a health probe that
// does not carry "Authorization: Bearer <token>".
func requireAdminToken(next http.Handler, token string) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/livez" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="syncd-admin"`)
			admin.WriteJSON(w, http.StatusUnauthorized, map[string]string{"error": "admin token required"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Admin token file bounds: a short token is guessable, a huge file is a
// mistake.
const (
	minAdminTokenBytes = 16
	maxAdminTokenBytes = 4 << 10
)

// ReadAdminToken reads the admin bearer token from path: the file's
// content without surrounding white space, at least 16 bytes.
func ReadAdminToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxAdminTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	if len(b) > maxAdminTokenBytes {
		return "", fmt.Errorf("--admin-token-file %s: larger than %d bytes", path, maxAdminTokenBytes)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < minAdminTokenBytes {
		return "", fmt.Errorf("--admin-token-file %s: the token must be at least %d bytes", path, minAdminTokenBytes)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", errors.New("--admin-token-file: the token must be one line without spaces")
	}
	return tok, nil
}

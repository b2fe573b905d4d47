package platform_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/platform"
)

// TestAdminAccess: with a token every admin route but the health probes
// needs it (probes cannot send one), pprof is served only when enabled,
// and the admin API only behind a token.
func TestAdminAccess(t *testing.T) {
	const token = "0123456789abcdef-admin"
	r := platform.NewReadiness(platform.NewClock())
	m, err := platform.NewMetrics(platform.BuildInfo{}, r)
	if err != nil {
		t.Fatal(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	handler := func(o platform.AdminOptions) http.Handler {
		return platform.NewAdminHandler(r, m, zap.NewNop(), o)
	}
	tests := []struct {
		name string
		opts platform.AdminOptions
		path string
		auth string
		want int
	}{
		{"liveness needs no token", platform.AdminOptions{Token: token}, "/livez", "", 200},
		{"readiness needs no token", platform.AdminOptions{Token: token}, "/readyz", "", 503}, // not ready yet, but answered
		{"metrics without a token", platform.AdminOptions{Token: token}, "/metrics", "", 401},
		{"metrics with a wrong token", platform.AdminOptions{Token: token}, "/metrics", "Bearer " + token + "x", 401},
		{"metrics with a basic credential", platform.AdminOptions{Token: token}, "/metrics", "Basic " + token, 401},
		{"metrics with the token", platform.AdminOptions{Token: token}, "/metrics", "Bearer " + token, 200},
		{"pprof without a token", platform.AdminOptions{Token: token, Pprof: true}, "/debug/pprof/", "", 401},
		{"pprof with the token", platform.AdminOptions{Token: token, Pprof: true}, "/debug/pprof/", "bearer " + token, 200},
		{"pprof off", platform.AdminOptions{Token: token}, "/debug/pprof/", "Bearer " + token, 404},
		{"unknown path without a token", platform.AdminOptions{Token: token}, "/nope", "", 401},
		{"no token configured: metrics open", platform.AdminOptions{}, "/metrics", "", 200},
		{"no token configured: pprof off by default", platform.AdminOptions{}, "/debug/pprof/", "", 404},
		{"no token configured: pprof on", platform.AdminOptions{Pprof: true}, "/debug/pprof/cmdline", "", 200},
		{"admin API without a token", platform.AdminOptions{Token: token, API: api}, "/admin/v1/partitions", "", 401},
		{"admin API with a wrong token", platform.AdminOptions{Token: token, API: api}, "/admin/v1/partitions", "Bearer " + token[:len(token)-1] + "X", 401},
		{"admin API with a token prefix", platform.AdminOptions{Token: token, API: api}, "/admin/v1/partitions", "Bearer " + token[:8], 401},
		{"admin API with the token", platform.AdminOptions{Token: token, API: api}, "/admin/v1/partitions", "Bearer " + token, 200},
		{"admin API never mounted without a token", platform.AdminOptions{API: api}, "/admin/v1/partitions", "", 404},
		{"admin API off", platform.AdminOptions{Token: token}, "/admin/v1/partitions", "Bearer " + token, 404},
		{"probes stay open beside the admin API", platform.AdminOptions{Token: token, API: api}, "/livez", "", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			handler(tc.opts).ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if rec.Code == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without a Bearer challenge")
			}
		})
	}
}

func TestReadAdminToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
		fail             bool
	}{
		{"one line with a newline", write("ok", "0123456789abcdef\n"), "0123456789abcdef", false},
		{"too short", write("short", "secret\n"), "", true},
		{"two words", write("words", "0123456789 abcdef\n"), "", true},
		{"too large", write("large", strings.Repeat("k", 5000)), "", true},
		{"missing", filepath.Join(dir, "none"), "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := platform.ReadAdminToken(tc.path)
			if (err != nil) != tc.fail || got != tc.want {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
}

// refresher records the invalidations and refreshes the admin endpoint
// asks for, in order.
type refresher struct {
	calls [][2]string
	steps []string
}

func (r *refresher) RefreshScopes(_ context.Context, partition, actorID string) int {
	r.calls = append(r.calls, [2]string{partition, actorID})
	r.steps = append(r.steps, "refresh "+partition+"/"+actorID)
	return 3
}

func (r *refresher) InvalidateScopes(partition, actorID string) {
	r.steps = append(r.steps, "invalidate "+partition+"/"+actorID)
}

// TestAdminRefreshScopes: POST /admin/realtime/refresh-scopes hands the
// partition (and optional actor) to the scope refresher, behind the admin
// token, after the resolver's kept grants of it are dropped; a body
// without a partition is refused.
func TestAdminRefreshScopes(t *testing.T) {
	const token = "0123456789abcdef-admin"
	r := platform.NewReadiness(platform.NewClock())
	m, err := platform.NewMetrics(platform.BuildInfo{}, r)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, body, auth string
		want             int
		call             [2]string
	}{
		{"without the token", `{"partition":"p"}`, "", 401, [2]string{}},
		{"a partition", `{"partition":"p"}`, "Bearer " + token, 200, [2]string{"p", ""}},
		{"one actor", `{"partition":"p","actorId":"alice"}`, "Bearer " + token, 200, [2]string{"p", "alice"}},
		{"no partition", `{"actorId":"alice"}`, "Bearer " + token, 400, [2]string{}},
		{"not JSON", `partition=p`, "Bearer " + token, 400, [2]string{}},
		{"an unknown field", `{"partition":"p","actor":"alice"}`, "Bearer " + token, 400, [2]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rf := &refresher{}
			h := platform.NewAdminHandler(r, m, zap.NewNop(), platform.AdminOptions{Token: token, Refresher: rf, Invalidator: rf})
			req := httptest.NewRequest(http.MethodPost, "/admin/realtime/refresh-scopes", strings.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if tc.want != 200 {
				if len(rf.steps) != 0 {
					t.Fatalf("%v on a refused request", rf.steps)
				}
				return
			}
			if len(rf.calls) != 1 || rf.calls[0] != tc.call || strings.TrimSpace(rec.Body.String()) != `{"sessions":3}` {
				t.Fatalf("calls %v, body %s", rf.calls, rec.Body)
			}
			who := tc.call[0] + "/" + tc.call[1]
			if len(rf.steps) != 2 || rf.steps[0] != "invalidate "+who || rf.steps[1] != "refresh "+who {
				t.Fatalf("steps %v: the kept grants must go before the refresh", rf.steps)
			}
		})
	}
	t.Run("no refresher: not served", func(t *testing.T) {
		h := platform.NewAdminHandler(r, m, zap.NewNop(), platform.AdminOptions{})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/admin/realtime/refresh-scopes", strings.NewReader(`{"partition":"p"}`)))
		if rec.Code != 404 {
			t.Fatalf("status %d", rec.Code)
		}
	})
}

// revoker records the revocations the admin endpoint asks for.
type revoker struct {
	calls [][2]string
	err   error
}

func (r *revoker) Revoke(_ context.Context, partition, leaseID string) (bool, error) {
	r.calls = append(r.calls, [2]string{partition, leaseID})
	return leaseID == "known", r.err
}

// TestAdminRevokeLease: POST /admin/leases/revoke hands the partition and
// lease id to the lease service (SPEC §7.3.4), behind the admin token.
func TestAdminRevokeLease(t *testing.T) {
	const token = "0123456789abcdef-admin"
	r := platform.NewReadiness(platform.NewClock())
	m, err := platform.NewMetrics(platform.BuildInfo{}, r)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, body, auth string
		storeErr         error
		want             int
		answer           string
	}{
		{"without the token", `{"partition":"p","leaseId":"known"}`, "", nil, 401, ""},
		{"a stored lease", `{"partition":"p","leaseId":"known"}`, "Bearer " + token, nil, 200, `{"found":true,"revoked":true}`},
		{"an id no lease carries", `{"partition":"p","leaseId":"other"}`, "Bearer " + token, nil, 200, `{"found":false,"revoked":true}`},
		{"no lease id", `{"partition":"p"}`, "Bearer " + token, nil, 400, ""},
		{"no partition", `{"leaseId":"known"}`, "Bearer " + token, nil, 400, ""},
		{"an unknown field", `{"partition":"p","leaseId":"known","x":1}`, "Bearer " + token, nil, 400, ""},
		{"the store fails", `{"partition":"p","leaseId":"known"}`, "Bearer " + token, errors.New("disk I/O error at /var/lib/x"), 500, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rv := &revoker{err: tc.storeErr}
			h := platform.NewAdminHandler(r, m, zap.NewNop(), platform.AdminOptions{Token: token, Leases: rv})
			req := httptest.NewRequest(http.MethodPost, "/admin/leases/revoke", strings.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if strings.Contains(rec.Body.String(), "/var/lib") {
				t.Fatalf("the store's error leaked: %s", rec.Body)
			}
			if tc.want == 401 || tc.want == 400 {
				if len(rv.calls) != 0 {
					t.Fatalf("revoked %v on a refused request", rv.calls)
				}
				return
			}
			if tc.answer != "" && strings.TrimSpace(rec.Body.String()) != tc.answer {
				t.Fatalf("body %s, want %s", rec.Body, tc.answer)
			}
		})
	}
	t.Run("leases off: not served", func(t *testing.T) {
		h := platform.NewAdminHandler(r, m, zap.NewNop(), platform.AdminOptions{})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/admin/leases/revoke", strings.NewReader(`{"partition":"p","leaseId":"x"}`)))
		if rec.Code != 404 {
			t.Fatalf("status %d", rec.Code)
		}
	})
}

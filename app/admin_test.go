package app_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/platform"
	"go.uber.org/fx"
	"go.uber.org/zap"
)

// TestAdminTokenOnTheListener: the assembled server enforces the token
// file on its admin listener and refuses to start with an unusable one.
func TestAdminTokenOnTheListener(t *testing.T) {
	cfg := testConfig(t)
	cfg.Admin.TokenFile = filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(cfg.Admin.TokenFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Admin.Pprof = true
	h := start(t, cfg)
	if code, _ := get(t, "GET", h.url(platform.ServerAdmin, "/metrics")); code != 401 {
		t.Fatalf("metrics without the token: %d", code)
	}
	req, _ := http.NewRequest("GET", h.url(platform.ServerAdmin, "/debug/pprof/"), nil)
	req.Header.Set("Authorization", "Bearer 0123456789abcdef0123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pprof with the token: %d", resp.StatusCode)
	}
	if code, _ := get(t, "GET", h.url(platform.ServerAdmin, "/livez")); code != 200 {
		t.Fatalf("livez: %d", code)
	}
}

// TestAdminAPIWithoutTokenFailsStart: the graph itself refuses --admin-api
// without a token, even when the configuration was not validated.
func TestAdminAPIWithoutTokenFailsStart(t *testing.T) {
	cfg := testConfig(t)
	cfg.Admin.API = true
	a := fx.New(app.Options(cfg, platform.ReadBuildInfo("test"), zap.NewNop()), fx.NopLogger)
	if err := a.Err(); err == nil || !strings.Contains(err.Error(), "--admin-api requires --admin-token-file") {
		t.Fatalf("err = %v, want the missing token named", err)
	}
}

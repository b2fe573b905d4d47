package app_test

import (
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app/platform"
)

// Without --test-control-listen nothing of the plane exists: no listener,
// and the sync API knows none of its paths. With it, the plane serves on
// its own listener and is still absent from the sync API.
func TestTestControlPlaneOnlyWhenAsked(t *testing.T) {
	off := start(t, testConfig(t))
	if a := off.listeners.Addr(platform.ServerTestControl); a != nil {
		t.Fatalf("test-control listener bound at %v without the flag", a)
	}
	if code, _ := get(t, "GET", off.url(platform.ServerSync, "/control/capabilities")); code != 404 {
		t.Fatalf("sync listener served the plane: %d", code)
	}
	off.app.RequireStop()

	cfg := testConfig(t)
	cfg.TestControlListen = "127.0.0.1:0"
	on := start(t, cfg)
	code, body := get(t, "GET", on.url(platform.ServerTestControl, "/control/capabilities"))
	if code != 200 || !strings.Contains(body, `"methods"`) {
		t.Fatalf("plane: %d %s", code, body)
	}
	if code, _ := get(t, "GET", on.url(platform.ServerSync, "/control/capabilities")); code != 404 {
		t.Fatalf("sync listener served the plane: %d", code)
	}
	on.app.RequireStop()
}

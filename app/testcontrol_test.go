package app_test

import (
	"database/sql"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/test/pgtest"
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

// With --test-control-database the plane starts only once its database is
// open, keeps each instance in a schema of its own there, and drops them
// when the server stops; a database it cannot reach fails the start.
func TestTestControlPlaneOnPostgres(t *testing.T) {
	base := pgtest.BaseURL(t)
	cfg := testConfig(t)
	cfg.TestControlListen, cfg.TestControlDatabase = "127.0.0.1:0", base
	on := start(t, cfg)
	body := `{"schema": {"version": 1, "tables": [{"name": "tcpg_app_notes", "primaryKey": "id",
		"columns": [{"name": "id", "type": "string", "nullable": false}], "scopes": [{"pattern": "user:{id}"}]}]},
		"partition": "p", "nowMs": 1}`
	resp, err := http.Post(on.url(platform.ServerTestControl, "/control/instances"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"id"`) {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	schemas := func() int {
		t.Helper()
		db, err := sql.Open("pgx", base)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		var n int
		// Only this test's: other planes may run beside it.
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_namespace n WHERE n.nspname LIKE 'syncd\_tc\_%'
  AND EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = n.oid AND c.relname = 'tcpg_app_notes')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := schemas(); n < 1 {
		t.Fatal("no schema holds the instance's table")
	}
	on.app.RequireStop()
	if n := schemas(); n != 0 {
		t.Fatalf("%d instance schemas survived the stop", n)
	}

	cfg.TestControlDatabase = "postgres://syncd@127.0.0.1:1/syncd?sslmode=disable&connect_timeout=5"
	failing := fxtest.New(t, app.Options(cfg, platform.ReadBuildInfo("test"), zaptest.NewLogger(t)))
	if err := failing.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "test-control database") {
		t.Fatalf("start with an unreachable test-control database: %v", err)
	}
}

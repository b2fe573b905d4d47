package testcontrol

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/test/pgtest"
)

func pgExec(t *testing.T, q string) {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.BaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.ExecContext(context.Background(), q); err != nil {
		t.Fatal(err)
	}
}

func pgSchemaExists(t *testing.T, name string) bool {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.BaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// A plane that starts drops the schemas a crashed plane left (no session
// holds that plane's lock), and leaves a live plane's alone; Shutdown
// drops its own.
func TestStartDropsLeftSchemas(t *testing.T) {
	base := pgtest.BaseURL(t)
	live := newPlaneWith(t, Options{Database: base})
	liveID := live.create("")
	left := SchemaPrefix + "00c0ffee00c0ffee_t7"
	pgExec(t, `CREATE SCHEMA "`+left+`"`)
	pgExec(t, `CREATE TABLE "`+left+`".sync_partitions (partition text)`)

	p := newPlaneWith(t, Options{Database: base})
	if pgSchemaExists(t, left) {
		t.Fatalf("%s, left by a crashed plane, survived a start", left)
	}
	mine := live.schemas()
	if len(mine) != 1 || !pgSchemaExists(t, mine[0]) {
		t.Fatalf("the live plane's schemas %v, want its instance's", mine)
	}
	id := p.create("")
	p.call(id, "nowMs", nil)
	ours := p.schemas()
	if err := p.m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, s := range ours {
		if pgSchemaExists(t, s) {
			t.Fatalf("%s survived Shutdown", s)
		}
	}
	live.call(liveID, "nowMs", nil)
}

// On PostgreSQL every instance holds up to InstanceConns connections, so
// the connection budget bounds the live instances too; a create past it
// is refused naming the budget.
func TestConnectionBudgetBoundsInstances(t *testing.T) {
	base := pgtest.BaseURL(t)
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{Database: "sqlite:x.db"}, "must be a postgres:// URL"},
		{Options{Database: base, DatabaseMaxConns: MinDatabaseMaxConns - 1}, fmt.Sprintf("want at least %d", MinDatabaseMaxConns)},
	} {
		if _, err := New(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("New(%+v): %v, want %q", tt.o, err, tt.want)
		}
	}
	p := newPlaneWith(t, Options{Database: base, DatabaseMaxConns: MinDatabaseMaxConns + InstanceConns, MaxInstances: 8, MaxBytes: 8 * MinInstanceBytes})
	p.create("")
	p.create("")
	code, b := p.do("POST", "/control/instances", `{"schema": `+tasksSchema+`, "partition": "p", "nowMs": 1}`, nil)
	var r struct{ Error, Code string }
	if code != http.StatusTooManyRequests || json.Unmarshal(b, &r) != nil || r.Code != "sync.rate_limited" ||
		!strings.Contains(r.Error, "maximum of 2 instances") || !strings.Contains(r.Error, "--test-control-database-max-conns") {
		t.Fatalf("create past the budget: %d %s", code, b)
	}
}

// A plane on PostgreSQL that has not started refuses creates.
func TestCreateBeforeStart(t *testing.T) {
	m, err := New(Options{Database: pgtest.BaseURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(t.Context(), []byte(`{"schema": `+tasksSchema+`, "partition": "p", "nowMs": 1}`)); err == nil ||
		!strings.Contains(err.Error(), "has not started") {
		t.Fatalf("create before Start: %v", err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// The flags' defaults and bounds are the plane's.
func TestConfigAgrees(t *testing.T) {
	for _, c := range []struct {
		name       string
		flag, mine int64
	}{
		{"max instances", config.DefaultTestControlMaxInstances, DefaultMaxInstances},
		{"max bytes", config.DefaultTestControlMaxBytes, DefaultMaxBytes},
		{"least instance bytes", config.MinTestControlInstanceBytes, MinInstanceBytes},
		{"database connections", config.DefaultTestControlDatabaseMaxConns, DefaultDatabaseMaxConns},
		{"least database connections", config.MinTestControlDatabaseMaxConns, MinDatabaseMaxConns},
	} {
		if c.flag != c.mine {
			t.Errorf("%s: the flag says %d, the plane %d", c.name, c.flag, c.mine)
		}
	}
}

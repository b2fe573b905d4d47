// Package startup_test runs "syncd serve" as a process with one thing
// wrong at a time (a key file, a listen address, a flag, the schema, the
// tracing environment) and requires that the start fails before the
// database is touched: a fresh --database is never created, an existing
// one keeps every byte (its pending migration is not applied), on SQLite
// and on PostgreSQL.
package startup_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of the catalog snapshots

	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/syncdproc"
	"github.com/syncd-dev/syncd/test/syncdproc/proctest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, "syncd-startup-", &binary)) }

// fixtures are the files the cases point at.
type fixtures struct {
	dir string
	// v1 is the demo schema as a file; v2 adds a table and schema version
	// 2, so a server that prepared storage would migrate a v1 database.
	v1, v2 string
}

func (f fixtures) file(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func newFixtures(t *testing.T) fixtures {
	t.Helper()
	f := fixtures{dir: t.TempDir()}
	f.v1 = f.file(t, "v1.ir.json", string(todos.IR()))
	var ir map[string]any
	if err := json.Unmarshal(todos.IR(), &ir); err != nil {
		t.Fatal(err)
	}
	ir["schemaVersion"] = 2
	ir["schemaVersions"] = append(ir["schemaVersions"].([]any), map[string]any{"version": 2, "migrations": []string{"0002_notes"}})
	ir["tables"] = append(ir["tables"].([]any), map[string]any{
		"name": "notes", "primaryKey": "id",
		"columns": []map[string]any{
			{"name": "id", "type": "string", "nullable": false},
			{"name": "owner_id", "type": "string", "nullable": false},
		},
		"scopes": []map[string]any{{"pattern": "user:{owner_id}", "variable": "owner_id", "column": "owner_id"}},
	})
	v2, err := json.Marshal(ir)
	if err != nil {
		t.Fatal(err)
	}
	f.v2 = f.file(t, "v2.ir.json", string(v2))
	return f
}

// target is a database the cases run against: snapshot describes its
// state (empty for a database that does not exist or holds nothing).
type target struct {
	name     string
	database string
	snapshot func(t *testing.T) string
	// fresh: the database must stay absent; otherwise unchanged.
	fresh bool
}

// sqliteDir lists the files of dir with their digests.
func sqliteDir(dir string) func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprintf("%s %x", e.Name(), sha256.Sum256(b)))
		}
		return strings.Join(lines, "\n")
	}
}

// pgCatalog lists the tables and columns of the DSN's schema and the
// rows of syncd's own tables (the schema marker among them).
func pgCatalog(dsn string) func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		rows, err := db.QueryContext(t.Context(), `SELECT table_name, column_name, data_type FROM information_schema.columns
			WHERE table_schema = current_schema() ORDER BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rows.Close() }()
		var lines []string
		tables := map[string]bool{}
		for rows.Next() {
			var tbl, col, typ string
			if err := rows.Scan(&tbl, &col, &typ); err != nil {
				t.Fatal(err)
			}
			tables[tbl] = true
			lines = append(lines, tbl+"."+col+" "+typ)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		names := make([]string, 0, len(tables))
		for tbl := range tables {
			names = append(names, tbl)
		}
		sort.Strings(names)
		for _, tbl := range names {
			if !strings.HasPrefix(tbl, "sync_") {
				continue
			}
			var digest string
			q := fmt.Sprintf(`SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM %q t`, tbl)
			if err := db.QueryRowContext(t.Context(), q).Scan(&digest); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, tbl+" rows "+digest)
		}
		return strings.Join(lines, "\n")
	}
}

// prepare runs the server once with schema until ready, so database holds
// a v1 layout, and stops it.
func prepare(t *testing.T, database, schema string) {
	t.Helper()
	n, err := syncdproc.Start(syncdproc.Options{Binary: binary, Args: []string{
		"--database", database, "--schema", schema, "--auth", "dev", "--shutdown-delay", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WaitReady(t.Context(), 20*time.Millisecond); err != nil {
		n.Kill()
		t.Fatal(err)
	}
	if err := n.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
}

type startCase struct {
	name string
	// args replace the defaults (--schema v2 --auth dev) for the flags
	// they name.
	args []string
	env  []string
	// want is part of the error the server reports; empty for the
	// control case, which must start.
	want string
}

func TestEveryStartCheckRunsBeforeTheDatabase(t *testing.T) {
	proctest.WatchSources(t)
	f := newFixtures(t)
	hsKey := f.file(t, "hs256.key", strings.Repeat("k", 40))
	notPEM := f.file(t, "not-pem.key", "a shared secret, not a PEM public key\n")
	shortToken := f.file(t, "short.token", "abc\n")
	garbageIR := f.file(t, "garbage.ir.json", `{"irVersion": 1, "tables": "none"}`)
	notADir := f.file(t, "segments-file", "a file where a directory should be")
	shortSignKey := f.file(t, "short-sign.key", "too short")
	descriptors, err := os.ReadFile(filepath.Join("..", "..", "app", "operations", "testdata", "todos.queries.ir.json"))
	if err != nil {
		t.Fatal(err)
	}
	f.file(t, "todos.queries.ir.json", string(descriptors))
	// A version 1 that version 2 does not extend: todos.position renamed.
	var old map[string]any
	if err := json.Unmarshal(todos.IR(), &old); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range old["tables"].([]any) {
		if tbl := tbl.(map[string]any); tbl["name"] == "todos" {
			for _, c := range tbl["columns"].([]any) {
				if c := c.(map[string]any); c["name"] == "position" {
					c["name"] = "rank"
				}
			}
		}
	}
	oldIR, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	incompatible := f.file(t, "v1-incompatible.ir.json", string(oldIR))
	joinDescriptor := f.file(t, "operations.json",
		`{"descriptors": {"file": "todos.queries.ir.json", "register": [{"name": "listProgress", "maxRows": 10}]}}`)

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	jwks := httptest.NewServer(http.NotFoundHandler())
	defer jwks.Close()

	jwt := func(more ...string) []string {
		return append([]string{"--auth", "jwt", "--jwt-algorithm", "HS256", "--jwt-key-file", hsKey}, more...)
	}
	cases := []startCase{
		{name: "JWT key file missing", args: []string{"--auth", "jwt", "--jwt-algorithm", "HS256", "--jwt-key-file", filepath.Join(f.dir, "absent.key")},
			want: "no such file"},
		{name: "JWT key not a PEM public key", args: []string{"--auth", "jwt", "--jwt-algorithm", "RS256", "--jwt-key-file", notPEM},
			want: "PEM"},
		{name: "JWKS unreachable at start", args: []string{"--auth", "jwt", "--jwt-jwks-url", jwks.URL + "/jwks.json"},
			want: "JWKS"},
		{name: "admin token file missing", args: []string{"--admin-token-file", filepath.Join(f.dir, "absent.token")},
			want: "--admin-token-file"},
		{name: "admin token too short", args: []string{"--admin-token-file", shortToken},
			want: "at least"},
		{name: "admin API without a token", args: []string{"--admin-api"},
			want: "--admin-api requires --admin-token-file"},
		{name: "sync address in use", args: []string{"--listen", busy.Addr().String()},
			want: "--listen " + busy.Addr().String() + ": bind: address already in use"},
		{name: "admin address in use", args: []string{"--admin-listen", busy.Addr().String()},
			want: "--admin-listen " + busy.Addr().String() + ": bind: address already in use"},
		{name: "test-control address in use", args: []string{"--test-control-listen", busy.Addr().String()},
			want: "--test-control-listen " + busy.Addr().String() + ": bind: address already in use"},
		{name: "sync address with an unknown port", args: []string{"--listen", "127.0.0.1:no-such-port"},
			want: "--listen 127.0.0.1:no-such-port"},
		{name: "sync address without a port", args: []string{"--listen", "127.0.0.1"},
			want: "want host:port"},
		{name: "CORS any origin without development auth", args: jwt("--cors-origins", "*"),
			want: "only with --auth dev"},
		{name: "CORS origin that is not an origin", args: []string{"--cors-origins", "localhost:5173"},
			want: "want an origin"},
		{name: "schema file missing", args: []string{"--schema", filepath.Join(f.dir, "absent.ir.json")},
			want: "no such file"},
		{name: "schema file that does not compile", args: []string{"--schema", garbageIR},
			want: "garbage.ir.json"},
		{name: "schema window with an incompatible older version", args: []string{"--schema", f.v2, "--schema", incompatible},
			want: `table \"todos\" column \"rank\"`},
		{name: "registered descriptor that does not compile", args: []string{"--operations", joinDescriptor},
			want: "listProgress"},
		{name: "signed-URL key file missing", args: []string{"--signed-url-key-file", filepath.Join(f.dir, "absent.key"), "--public-url", "http://127.0.0.1:8787"},
			want: "--signed-url-key-file"},
		{name: "signed-URL key too short", args: []string{"--signed-url-key-file", shortSignKey, "--public-url", "http://127.0.0.1:8787"},
			want: "--signed-url-key-file"},
		{name: "auth-lease key file missing", args: []string{"--auth-lease-ttl", "15m", "--auth-lease-key-file", filepath.Join(f.dir, "absent.keys")},
			want: "--auth-lease-key-file"},
		{name: "auth-lease key too short", args: []string{"--auth-lease-ttl", "15m", "--auth-lease-key-file", shortSignKey},
			want: "--auth-lease-key-file"},
		{name: "segment directory is a file", args: []string{"--segment-store", "fs", "--segment-dir", notADir},
			want: "segments-file"},
		{name: "OTLP endpoint not an HTTP URL", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=ftp://127.0.0.1:4318"},
			want: "want an http:// or https:// URL"},
		{name: "OTLP over gRPC", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
			want: "http/protobuf"},
		{name: "unknown trace sampler", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER=sometimes"},
			want: "OTEL_TRACES_SAMPLER"},
		{name: "unknown flag", args: []string{"--cors-origin", "http://localhost:5173"},
			want: "did you mean --cors-origins"},
		// Last: it starts, creates the fresh databases and migrates the
		// existing ones, which shows that the snapshots see both.
		{name: "control: nothing wrong"},
	}

	sqliteFresh := t.TempDir()
	sqliteExisting := t.TempDir()
	prepare(t, filepath.Join(sqliteExisting, "syncd.db"), f.v1)
	targets := []func(t *testing.T) target{
		func(t *testing.T) target {
			dir, err := os.MkdirTemp(sqliteFresh, "case-")
			if err != nil {
				t.Fatal(err)
			}
			return target{name: "sqlite fresh", database: filepath.Join(dir, "syncd.db"), snapshot: sqliteDir(dir), fresh: true}
		},
		func(*testing.T) target {
			return target{name: "sqlite existing", database: filepath.Join(sqliteExisting, "syncd.db"), snapshot: sqliteDir(sqliteExisting)}
		},
	}
	if os.Getenv(pgtest.EnvURL) != "" || os.Getenv(pgtest.EnvRequire) == "1" {
		pgExisting := pgtest.DSN(t)
		prepare(t, pgExisting, f.v1)
		targets = append(targets,
			func(t *testing.T) target {
				dsn := pgtest.DSN(t)
				return target{name: "postgres fresh", database: dsn, snapshot: pgCatalog(dsn), fresh: true}
			},
			func(*testing.T) target {
				return target{name: "postgres existing", database: pgExisting, snapshot: pgCatalog(pgExisting)}
			})
	} else {
		t.Log("PostgreSQL targets skipped: " + pgtest.EnvURL + " is not set")
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, newTarget := range targets {
				tg := newTarget(t)
				before := tg.snapshot(t)
				if tg.fresh && before != "" {
					t.Fatalf("%s: not empty before the run:\n%s", tg.name, before)
				}
				log := runServe(t, tc, f, tg.database)
				after := tg.snapshot(t)
				switch {
				case tc.want == "" && after == before:
					t.Errorf("%s: the control run left the database as it was: the snapshot cannot see a migration", tg.name)
				case tc.want != "" && after != before:
					t.Errorf("%s: the failed start touched the database:\nbefore:\n%s\nafter:\n%s\nlog:\n%s", tg.name, before, after, log)
				}
			}
		})
	}
}

// runServe starts the server for one case and returns its log: it must
// end on its own with tc.want in the log, or (the control case) become
// ready and stop cleanly.
func runServe(t *testing.T, tc startCase, f fixtures, database string) string {
	t.Helper()
	args := []string{"--database", database, "--shutdown-delay", "0"}
	if !hasFlag(tc.args, "--schema") {
		args = append(args, "--schema", f.v2)
	}
	if !hasFlag(tc.args, "--auth") {
		args = append(args, "--auth", "dev")
	}
	args = append(args, tc.args...)
	n, err := syncdproc.Start(syncdproc.Options{Binary: binary, Args: args, Env: tc.env})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err = n.WaitReady(ctx, 20*time.Millisecond)
	if tc.want == "" {
		if err != nil {
			t.Fatalf("control case did not start: %v", err)
		}
		if err := n.Stop(time.Minute); err != nil {
			t.Fatalf("control case stop: %v\n%s", err, n.Tail())
		}
		return n.Tail()
	}
	if err == nil {
		_ = n.Stop(time.Minute)
		t.Fatalf("started despite %s:\n%s", tc.name, n.Tail())
	}
	if !errors.Is(err, syncdproc.ErrExited) {
		n.Kill()
		t.Fatal(err)
	}
	exit := n.ExitError()
	if exit == nil {
		t.Fatalf("exit status 0 after a failed start:\n%s", n.Tail())
	}
	tail := n.Tail()
	if !strings.Contains(tail, tc.want) {
		t.Errorf("the log does not say %q:\n%s", tc.want, tail)
	}
	return tail
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/test/pgtest"
)

// testPrefix is a schema prefix no other test shares, so sets of other
// tests running at the same time are never in the way.
func testPrefix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "syncd_st" + hex.EncodeToString(b) + "_"
}

func openSet(t *testing.T, base, prefix string) (*postgres.SchemaSet, []string) {
	t.Helper()
	s, dropped, err := postgres.OpenSchemaSet(t.Context(), postgres.SchemaSetOptions{DSN: base, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s, dropped
}

func schemaExists(t *testing.T, base, full string) bool {
	t.Helper()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", full).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// backendGone waits until the server has ended the backend pid, and with
// it the session's advisory locks.
func backendGone(t *testing.T, base string, pid int) {
	t.Helper()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d still there after 10 s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A set's schemas are whole stores; a set that opens drops what dead
// sets left (their lock gone with their session) and nothing of a live
// one; Close drops the set's own.
func TestSchemaSetLifecycle(t *testing.T) {
	base := pgtest.BaseURL(t)
	prefix := testPrefix(t)
	crashed, dropped := openSet(t, base, prefix)
	if len(dropped) != 0 {
		t.Fatalf("a fresh prefix had leftovers: %v", dropped)
	}
	for _, n := range []string{"t1", "t1_b"} {
		if err := crashed.Create(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	live, _ := openSet(t, base, prefix)
	defer func() { _ = live.Close(context.Background()) }()
	if err := live.Create(t.Context(), "t1"); err != nil {
		t.Fatal(err)
	}
	backendGone(t, base, crashed.Abandon())

	later, dropped := openSet(t, base, prefix)
	want := []string{crashed.Schema("t1"), crashed.Schema("t1_b")}
	if !slices.Equal(dropped, want) {
		t.Fatalf("dropped %v, want the crashed set's %v", dropped, want)
	}
	for _, full := range want {
		if schemaExists(t, base, full) {
			t.Fatalf("%s survived", full)
		}
	}
	if !schemaExists(t, base, live.Schema("t1")) {
		t.Fatal("a live set's schema was dropped")
	}
	if err := later.Create(t.Context(), "t9"); err != nil {
		t.Fatal(err)
	}
	if err := later.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if schemaExists(t, base, later.Schema("t9")) {
		t.Fatal("Close left the set's schema")
	}
}

func TestSchemaSetRefusesBadNames(t *testing.T) {
	base := pgtest.BaseURL(t)
	for _, p := range []string{"", "Syncd_", "syncd", "syncd-x_", `syn"cd_`} {
		if _, _, err := postgres.OpenSchemaSet(t.Context(), postgres.SchemaSetOptions{DSN: base, Prefix: p}); err == nil {
			t.Fatalf("prefix %q accepted", p)
		}
	}
	s, _ := openSet(t, base, testPrefix(t))
	defer func() { _ = s.Close(context.Background()) }()
	for _, n := range []string{"", "T1", "a-b", `x"y`, strings.Repeat("a", 40)} {
		if err := s.Create(t.Context(), n); err == nil {
			t.Fatalf("name %q accepted", n)
		}
		if _, err := s.DSN(n); err == nil {
			t.Fatalf("DSN of name %q accepted", n)
		}
	}
}

func TestWithSearchPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?search_path=s1&sslmode=disable"},
		{"postgresql://u@h/db?search_path=old", "postgresql://u@h/db?search_path=s1"},
		{"host=h dbname=db", "host=h dbname=db search_path=s1"},
	}
	for _, tt := range tests {
		got, err := postgres.WithSearchPath(tt.in, "s1")
		if err != nil || got != tt.want {
			t.Fatalf("%s: %q %v, want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := postgres.WithSearchPath("postgres://h/db", "s; DROP"); err == nil {
		t.Fatal("a schema name with SQL accepted")
	}
}

// CopyData makes a schema the snapshot of another of the same layout:
// rows replaced, the writer-fence trigger in force after it, and Size
// grows with rows.
func TestSchemaSetCopyData(t *testing.T) {
	base := pgtest.BaseURL(t)
	s, _ := openSet(t, base, testPrefix(t))
	defer func() { _ = s.Close(context.Background()) }()
	ctx := t.Context()
	sch := tasksSchema(t)
	stores := map[string]*postgres.Store{}
	for _, n := range []string{"live", "copy"} {
		if err := s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		dsn, err := s.DSN(n)
		if err != nil {
			t.Fatal(err)
		}
		st, err := postgres.Open(ctx, postgres.Options{DSN: dsn, MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = st.Close() }()
		if err := st.EnsureSchema(ctx, sch, nil); err != nil {
			t.Fatal(err)
		}
		stores[n] = st
	}
	empty, err := s.Size(ctx, "live")
	if err != nil || empty == 0 {
		t.Fatalf("size of an empty layout: %d %v", empty, err)
	}
	exec := func(n, q string, args ...any) {
		t.Helper()
		if _, err := stores[n].DB().DB.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %s: %v", n, q, err)
		}
	}
	count := func(n, q string) int {
		t.Helper()
		var c int
		if err := stores[n].DB().DB.QueryRowContext(ctx, q).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	exec("copy", "INSERT INTO sync_partitions(partition) VALUES ('stale')")
	exec("live", "INSERT INTO sync_partitions(partition) VALUES ('p1'), ('p2')")
	const commit = `INSERT INTO sync_commits(partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version)
VALUES ('p1', $1, 'c', $2, 'a', 1, 1)`
	exec("live", commit, 1, "cc1")
	exec("live", "INSERT INTO sync_writer_fence(partition, required_writer_version) VALUES ('p1', 9)")
	if err := s.CopyData(ctx, "live", "copy"); err != nil {
		t.Fatal(err)
	}
	if got := count("copy", "SELECT count(*) FROM sync_partitions WHERE partition IN ('p1', 'p2')"); got != 2 {
		t.Fatalf("%d partitions copied, want 2", got)
	}
	if got := count("copy", "SELECT count(*) FROM sync_partitions WHERE partition = 'stale'"); got != 0 {
		t.Fatal("the target's own rows survived the copy")
	}
	if got := count("copy", "SELECT count(*) FROM sync_writer_fence") + count("copy", "SELECT count(*) FROM sync_commits"); got != 2 {
		t.Fatalf("%d fence and commit rows copied, want 2", got)
	}
	// The fence trigger is in force in the copy.
	if _, err := stores["copy"].DB().DB.ExecContext(ctx, commit, 2, "cc2"); err == nil || !strings.Contains(err.Error(), "writer_fence") {
		t.Fatalf("an unfenced commit in the copy: %v, want the fence's refusal", err)
	}
	if full, err := s.Size(ctx, "live"); err != nil || full <= empty {
		t.Fatalf("size with rows %d (%v), empty %d", full, err, empty)
	}
	if err := s.CopyData(ctx, "live", "nope"); err == nil {
		t.Fatal("a copy into a missing schema succeeded")
	}
}

// tasksSchema is a one-table schema for layout tests.
func tasksSchema(t *testing.T) *schema.Schema {
	t.Helper()
	nullable := false
	sc, err := schema.Compile(&schema.IR{IRVersion: 1, SchemaVersion: 1,
		SchemaVersions: []schema.IRSchemaVersion{{Version: 1, Migrations: []string{}}},
		Tables: []schema.IRTable{{Name: "tasks", PrimaryKey: "id",
			Columns: []schema.IRColumn{{Name: "id", Type: "string", Nullable: &nullable}, {Name: "project_id", Type: "string", Nullable: &nullable}},
			Scopes:  []schema.IRScope{{Pattern: "project:{project_id}", Column: "project_id"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

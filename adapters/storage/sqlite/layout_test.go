package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
)

// TestTablesAreKeyedByTheirPrimaryKey: a new database stores every table
// with a declared primary key (the sync_* tables and the app tables) as
// one B-tree, WITHOUT ROWID, so a push dirties no separate rowid tree.
// sync_schema_meta keeps its INTEGER key, which is the rowid itself.
func TestTablesAreKeyedByTheirPrimaryKey(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sync.db")
	s, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureSchema(ctx, storetest.Schema(t, storetest.IR), nil); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	db, err := sql.Open("sqlite", sqlite.DSN(sqlite.Options{Path: path}, false))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	rows, err := db.QueryContext(ctx, `SELECT name, wr FROM pragma_table_list WHERE schema='main' AND type='table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	seen := map[string]bool{}
	for rows.Next() {
		var name string
		var wr bool
		if err := rows.Scan(&name, &wr); err != nil {
			t.Fatal(err)
		}
		seen[name] = true
		if want := name != "sync_schema_meta"; wr != want {
			t.Errorf("table %s: WITHOUT ROWID = %v, want %v", name, wr, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sync_commits", "sync_changes", "sync_change_scopes", "sync_row_scopes", "sync_push_results", "sync_partitions", "sync_schema_meta"} {
		if !seen[name] {
			t.Errorf("table %s missing", name)
		}
	}
	if len(seen) < 10 {
		t.Errorf("only %d tables: %v", len(seen), seen)
	}
}

// rowidTypes is the SQLite dialect as it was before tables were keyed:
// its core DDL creates rowid tables.
type rowidTypes struct{ sqlstore.Dialect }

func (d rowidTypes) Types() sqlstore.Types {
	t := d.Dialect.Types()
	t.Keyed = ""
	return t
}

// TestRowidDatabasesStillServe: a database whose core tables were created
// as rowid tables (by an earlier release) passes the layout check, takes
// pushes and serves reads, and keeps its tables as they were; a table it
// gains later is keyed.
func TestRowidDatabasesStillServe(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sync.db")
	probe, err := sqlite.New(sqlite.Options{Path: filepath.Join(t.TempDir(), "unused.db")})
	if err != nil {
		t.Fatal(err)
	}
	old := sqlstore.CoreStatements(rowidTypes{probe.Dialect()})
	_ = probe.Close()
	db, err := sql.Open("sqlite", sqlite.DSN(sqlite.Options{Path: path}, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range old {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	_ = db.Close()

	s, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.EnsureSchema(ctx, storetest.Schema(t, storetest.IR), nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2"} {
		if err := storetest.PushItem(ctx, s, "p", id, nil, nil); err != nil {
			t.Fatal(err)
		}
		if !storetest.ItemPresent(t, s, "p", id) {
			t.Fatalf("row %s not read back", id)
		}
	}
	if got := storetest.MaxSeq(t, s, "p"); got != 2 {
		t.Fatalf("max seq %d, want 2", got)
	}
	rd, err := sql.Open("sqlite", sqlite.DSN(sqlite.Options{Path: path}, false))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rd.Close() }()
	for _, tc := range []struct {
		table string
		wr    bool
	}{{"sync_commits", false}, {"sync_changes", false}, {"items", true}} {
		var wr bool
		if err := rd.QueryRowContext(ctx, "SELECT wr FROM pragma_table_list WHERE schema='main' AND name=?", tc.table).Scan(&wr); err != nil {
			t.Fatalf("%s: %v", tc.table, err)
		}
		if wr != tc.wr {
			t.Errorf("table %s: WITHOUT ROWID = %v, want %v", tc.table, wr, tc.wr)
		}
	}
}

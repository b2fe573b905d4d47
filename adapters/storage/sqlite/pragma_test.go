package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
)

// TestConnectionPragmas: the writer keeps temporary structures (savepoint
// sub-journals) in memory; readers keep SQLite's default.
func TestConnectionPragmas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	for _, tt := range []struct {
		name   string
		writer bool
		want   int // PRAGMA temp_store: 0 default, 2 memory
	}{
		{"writer", true, 2},
		{"reader", false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := sql.Open("sqlite", sqlite.DSN(sqlite.Options{Path: path}, tt.writer))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			var got int
			if err := db.QueryRowContext(context.Background(), "PRAGMA temp_store").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("temp_store = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestMaxPageCount: with MaxPageCount every writing connection stops the
// file at that many pages; the write that would pass it fails as IsFull
// and leaves the rows written before it.
func TestMaxPageCount(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pages   int64
		full    bool
		atLeast int64 // PRAGMA max_page_count
	}{
		{"capped", 64, true, 64},
		{"uncapped", 0, false, 1 << 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db, err := sql.Open("sqlite", sqlite.DSN(sqlite.Options{Path: filepath.Join(t.TempDir(), "p.db"), MaxPageCount: tt.pages}, true))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			var limit int64
			if err := db.QueryRowContext(ctx, "PRAGMA max_page_count").Scan(&limit); err != nil {
				t.Fatal(err)
			}
			if (tt.pages > 0 && limit != tt.pages) || limit < tt.atLeast {
				t.Fatalf("max_page_count = %d, want %d", limit, tt.atLeast)
			}
			if _, err := db.ExecContext(ctx, "CREATE TABLE t (v BLOB)"); err != nil {
				t.Fatal(err)
			}
			var werr error
			written := 0
			for range 100 { // 100 × 8 KiB: past 64 pages of 4 KiB
				if _, werr = db.ExecContext(ctx, "INSERT INTO t VALUES (zeroblob(8192))"); werr != nil {
					break
				}
				written++
			}
			if got := werr != nil && sqlite.IsFull(werr); got != tt.full || (!tt.full && werr != nil) {
				t.Fatalf("after %d rows: %v (IsFull %v), want full %v", written, werr, got, tt.full)
			}
			var rows int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&rows); err != nil || rows != written {
				t.Fatalf("%d rows stored (%v), %d written", rows, err, written)
			}
		})
	}
}

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

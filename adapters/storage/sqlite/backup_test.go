package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
)

// A backup taken while another connection keeps committing is one
// consistent snapshot, and an existing file is never overwritten.
func TestBackupWhileWriting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "live.db")
	db, err := sql.Open("sqlite", sqlite.DSN(sqlite.Options{Path: path}, true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	// Every transaction writes a and b together: a snapshot has a == b.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = tx.ExecContext(ctx, "INSERT INTO t(id, a, b) VALUES (?, ?, 0)", i, i)
			_, _ = tx.ExecContext(ctx, "UPDATE t SET b = a WHERE id = ?", i)
			if err := tx.Commit(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt()
	outs := []string{filepath.Join(dir, "b1.db"), filepath.Join(dir, "b2.db")}
	for _, out := range outs {
		if err := sqlite.Backup(ctx, path, out); err != nil {
			t.Fatal(err)
		}
	}
	halt()
	for _, out := range outs {
		b, err := sql.Open("sqlite", "file:"+out+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		var n, torn int
		if err := b.QueryRow("SELECT count(*), count(*) FILTER (WHERE a != b) FROM t").Scan(&n, &torn); err != nil {
			t.Fatal(err)
		}
		_ = b.Close()
		if torn != 0 {
			t.Fatalf("%s: %d of %d rows torn", out, torn, n)
		}
	}
	err = sqlite.Backup(ctx, path, outs[0])
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("over an existing backup: %v", err)
	}
	if err := sqlite.Backup(ctx, filepath.Join(dir, "missing.db"), filepath.Join(dir, "x.db")); err == nil {
		t.Fatal("a missing database was backed up")
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 5 { // live.db, -wal, -shm, b1, b2
		t.Fatalf("left behind: %v", ents)
	}
}

// An open that fails names the path and why, not only the engine's
// "unable to open database file".
func TestOpenErrorsNameThePathAndTheCause(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ path, want string }{
		{filepath.Join(dir, "missing", "x.db"), "its directory"},
		{dir, "is a directory"},
	} {
		_, err := sqlite.Open(context.Background(), sqlite.Options{Path: tt.path})
		if err == nil || !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("open %s: %v, want the path and %q", tt.path, err, tt.want)
		}
	}
}

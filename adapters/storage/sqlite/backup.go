package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the database at path to out while
// other processes (a running server) keep reading and writing it: one
// read transaction's snapshot, written with VACUUM INTO (compacted, WAL
// folded in). The copy appears at out only once complete and synced; an
// existing out is refused, never overwritten.
func Backup(ctx context.Context, path, out string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("database %s: %w", path, err)
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("backup %s already exists: choose a new file", out)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup %s: %w", out, err)
	}
	dir := filepath.Dir(out)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(out)+".partial-*")
	if err != nil {
		return fmt.Errorf("backup directory %s: %w", dir, err)
	}
	tmpName := tmp.Name()
	_ = tmp.Close()
	_ = os.Remove(tmpName) // VACUUM INTO wants a new file
	defer func() { _ = os.Remove(tmpName) }()

	// VACUUM INTO only reads the source (query_only would refuse it).
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", fileURI(path)+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", tmpName); err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	f, err := os.Open(tmpName)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync the backup: %w", err)
	}
	// Link, not rename: an out created meanwhile is refused, not replaced.
	if err := os.Link(tmpName, out); err != nil {
		return fmt.Errorf("backup %s: %w", out, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

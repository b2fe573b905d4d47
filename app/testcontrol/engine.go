package testcontrol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
)

// engine keeps the instances' databases: a SQLite file each (the
// default), or a PostgreSQL schema each (Options.Database).
type engine interface {
	// newDB makes the empty database of instance id, its writes capped at
	// capBytes; dir is the instance's directory, removed after drop.
	newDB(ctx context.Context, id, dir string, capBytes int64) (database, error)
	// maxInstances is how many instances the engine can hold at once
	// (0: no bound of its own).
	maxInstances() int
	// close releases the engine once every instance is closed.
	close(ctx context.Context) error
}

// storeOptions are what every instance store is opened with.
type storeOptions struct {
	newEpoch func() string
	now      func() time.Time
}

// layoutFunc makes an open store's tables: the instance schema's and its
// side tables'.
type layoutFunc func(ctx context.Context, st *sqlstore.Store) error

// database is one instance's database.
type database interface {
	// open opens a store over the database.
	open(ctx context.Context, o storeOptions) (*sqlstore.Store, error)
	// ready runs once, after the first store laid the database out.
	ready(ctx context.Context) error
	// room refuses a write (errStoreFull) once the database reached its
	// cap, where the engine does not refuse it itself.
	room(ctx context.Context) error
	// full reports whether err is the engine's own refusal of a write
	// past the cap.
	full(err error) bool
	// capture snapshots the database; live is the store open on it.
	capture(ctx context.Context, live *sqlstore.Store, o storeOptions, layout layoutFunc) error
	// restore replaces the database with the last capture; no store is
	// open on it.
	restore(ctx context.Context, o storeOptions, layout layoutFunc) error
	// drop deletes the database and its capture; no store is open on it.
	drop(ctx context.Context) error
}

// sqlitePageBytes is the page size of an instance database: SQLite's
// default, which a new database (and a VACUUM INTO snapshot of it) has.
const sqlitePageBytes = 4096

// sqliteEngine keeps each instance in a SQLite file in its directory.
type sqliteEngine struct{}

func (sqliteEngine) newDB(_ context.Context, _, dir string, capBytes int64) (database, error) {
	return &sqliteDB{path: filepath.Join(dir, "sync.db"), backup: filepath.Join(dir, "backup.db"),
		pages: capBytes / sqlitePageBytes}, nil
}

func (sqliteEngine) maxInstances() int           { return 0 }
func (sqliteEngine) close(context.Context) error { return nil }

// sqliteDB is an instance's SQLite file; SQLite itself refuses a write
// past its page cap.
type sqliteDB struct {
	path, backup string
	pages        int64
}

func (d *sqliteDB) open(ctx context.Context, o storeOptions) (*sqlstore.Store, error) {
	st, err := sqlite.Open(ctx, sqlite.Options{
		Path: d.path, Synchronous: "NORMAL", NewEpoch: o.newEpoch, Now: o.now,
		// The server's touch interval and head reuse: an instance serves
		// requests as the server does.
		TouchInterval: sqlstore.DefaultTouchInterval,
		// One push per transaction: a test drives few pushes, and group
		// commit only delays them.
		PushGroup: 1,
		// The instance's part of --test-control-max-bytes: a write past it
		// fails (faultStore answers it as a catalog error).
		MaxPageCount: d.pages,
	})
	if err != nil {
		return nil, err
	}
	return st.Store, nil
}

func (d *sqliteDB) ready(context.Context) error { return nil }
func (d *sqliteDB) room(context.Context) error  { return nil }
func (d *sqliteDB) full(err error) bool         { return sqlite.IsFull(err) }

func (d *sqliteDB) capture(ctx context.Context, live *sqlstore.Store, _ storeOptions, _ layoutFunc) error {
	_ = os.Remove(d.backup)
	if _, err := live.DB().ExecContext(ctx, "VACUUM INTO ?", d.backup); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

func (d *sqliteDB) restore(_ context.Context, _ storeOptions, _ layoutFunc) error {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(d.path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return copyFile(d.backup, d.path)
}

// drop leaves the file to the removal of the instance directory.
func (d *sqliteDB) drop(context.Context) error { return nil }

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return err
	}
	return dst.Close()
}

// Package sqlite is the embedded storage engine: bun + sqlitedialect over
// modernc.org/sqlite (pure Go), in WAL mode with one writer connection that
// serializes every write transaction (BEGIN IMMEDIATE) and a read pool.
// The engine itself is adapters/storage/sqlstore; this package holds the
// SQLite dialect: DSNs, DDL types, the fence trigger, catalog reads and
// error classification.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"go.opentelemetry.io/otel/trace"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// Options configure Open and New.
type Options struct {
	// Path is the database file (created when missing). Required.
	Path string
	// BusyTimeout is how long a connection waits for another process's
	// lock (default 5s).
	BusyTimeout time.Duration
	// Synchronous is the durability level: "FULL" (default: every commit is
	// on disk before Push returns, as with SQLite's own default) or
	// "NORMAL" (WAL: a power loss may drop the last commits, never corrupt).
	Synchronous string
	// ReadConns sizes the read pool (default: GOMAXPROCS, at least 2).
	ReadConns int
	// DisableForeignKeys turns off foreign key enforcement (on by default).
	DisableForeignKeys bool
	// TouchInterval: see sqlstore.Config.
	TouchInterval time.Duration
	// NewEpoch mints log epochs (default: random).
	NewEpoch func() string
	// Now: see sqlstore.Config.
	Now func() time.Time
	// PushGroup bounds group commit: pushes that queue while the writer
	// is busy share one transaction and one COMMIT (one WAL fsync), at most
	// PushGroup of them (default 64; 1 commits every push alone).
	PushGroup int
	// PushGroupOpen stops a group taking more pushes once it has been open
	// this long (default 10ms), bounding the wait of its first pushes.
	PushGroupOpen time.Duration
	// Tracer: see sqlstore.Config.
	Tracer trace.TracerProvider
	// RecentLogBytes bounds the commits kept in memory to answer pulls:
	// see sqlstore.Config.
	RecentLogBytes int64
	// MaxPageCount caps the database file at this many pages (PRAGMA
	// max_page_count on every writing connection; 0: SQLite's own limit).
	// A write that would grow the file past it fails with SQLITE_FULL and
	// its transaction rolls back; IsFull recognizes that error.
	MaxPageCount int64
}

// Store is the SQLite storage engine.
type Store struct {
	*sqlstore.Store
	writer *sql.DB
	reader *sql.DB
	w      *writer
	direct *directReads // also sqlstore's Config.Direct; kept for tests
	path   string
}

var _ ports.Storage = (*Store)(nil)

func (o Options) busyTimeout() time.Duration {
	if o.BusyTimeout <= 0 {
		return 5 * time.Second
	}
	return o.BusyTimeout
}

// DSN renders the modernc DSN for path; writer adds _txlock=immediate.
func DSN(o Options, writer bool) string {
	busy := o.busyTimeout()
	syncMode := strings.ToUpper(o.Synchronous)
	if syncMode != "NORMAL" {
		syncMode = "FULL"
	}
	fk := 1
	if o.DisableForeignKeys {
		fk = 0
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", fmt.Sprintf("foreign_keys(%d)", fk))
	q.Add("_pragma", "synchronous("+syncMode+")")
	if writer {
		q.Set("_txlock", "immediate")
		// Savepoint sub-journals stay in memory: a push group's
		// savepoints otherwise spill them to a temporary file past 64 KiB,
		// an open, writes and a close per group. A group's pages bound it.
		q.Add("_pragma", "temp_store(MEMORY)")
		if o.MaxPageCount > 0 {
			q.Add("_pragma", fmt.Sprintf("max_page_count(%d)", o.MaxPageCount))
		}
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return fileURI(o.Path) + "?" + q.Encode()
}

// fileURI is the SQLite URI every connection of the store opens path by.
// SQLite decodes percent escapes in a URI's path and ends it at '?' or
// '#', so those three are escaped: the file opened is the one named.
func fileURI(path string) string {
	return "file:" + uriPathEscaper.Replace(path)
}

var uriPathEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// Open opens (creating) the database; run EnsureSchema before row work.
// It is New followed by Connect.
func Open(ctx context.Context, o Options) (*Store, error) {
	st, err := New(o)
	if err != nil {
		return nil, err
	}
	if err := st.Connect(ctx); err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

// New prepares the engine without touching the file system: the file is
// opened (and created when missing) by Connect or by the first statement.
// A server uses it to check everything else before a database appears.
func New(o Options) (*Store, error) {
	if o.Path == "" {
		return nil, errors.New("sqlite: Options.Path is required")
	}
	w, err := sql.Open("sqlite", DSN(o, true))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open writer: %w", err)
	}
	w.SetMaxOpenConns(2)
	w.SetMaxIdleConns(2)
	w.SetConnMaxLifetime(0)
	r, err := sql.Open("sqlite", DSN(o, false))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite: open reader: %w", err)
	}
	n := o.ReadConns
	if n <= 0 {
		n = max(2, runtime.GOMAXPROCS(0))
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	d := &dialect{w: newWriter(w), group: o.PushGroup, groupOpen: o.PushGroupOpen}
	if d.group <= 0 {
		d.group = 64
	}
	if d.groupOpen <= 0 {
		d.groupOpen = 10 * time.Millisecond
	}
	wdb := bun.NewDB(w, sqlitedialect.New())
	rdb := bun.NewDB(r, sqlitedialect.New())
	rs := sqlstore.NewStmtDB(r)
	direct := newDirectReads(o.Path, o.busyTimeout(), n)
	st := &Store{writer: w, reader: r, w: d.w, path: o.Path, direct: direct}
	st.Store = sqlstore.New(sqlstore.Config{
		Dialect: d, DB: wdb, ReadDB: rdb, Reader: rs, Direct: direct,
		NewEpoch: o.NewEpoch, TouchInterval: o.TouchInterval, Now: o.Now, Tracer: o.Tracer, RecentLogBytes: o.RecentLogBytes,
		Close: func() error {
			d.w.close()
			rs.Close()
			direct.Close()
			return errors.Join(r.Close(), w.Close())
		},
	})
	return st, nil
}

// Connect opens the database file, creating it when missing; an error
// names the path and why it cannot be opened.
func (s *Store) Connect(ctx context.Context) error {
	if err := s.writer.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite %s: %s", s.path, openCause(s.path, err))
	}
	return nil
}

// dialect is the SQLite Dialect.
type dialect struct {
	w         *writer
	group     int
	groupOpen time.Duration
}

// PushBatch makes the dialect a sqlstore.GroupCommitter: every write
// transaction serializes on the one writer connection anyway, so pushes
// that queue behind it share one transaction and one COMMIT.
func (d *dialect) PushBatch() (int, time.Duration) { return d.group, d.groupOpen }

var sqliteTypes = sqlstore.Types{
	Seq: "INTEGER", Int: "INTEGER", SmallOp: "INTEGER", JSON: "TEXT", Doc: "TEXT", Blob: "BLOB",
	Bool: "INTEGER", False: "0", Key: "TEXT",
	// One B-tree per table instead of a rowid table beside its primary
	// key's index: fewer pages, so fewer WAL frames, per push.
	Keyed: " WITHOUT ROWID",
	Column: func(t schema.ColumnType) string {
		switch t {
		case schema.TypeInteger, schema.TypeBoolean:
			return "INTEGER"
		case schema.TypeFloat:
			return "REAL"
		case schema.TypeBytes, schema.TypeCRDT:
			return "BLOB"
		}
		return "TEXT"
	},
}

func (*dialect) Name() string                 { return "sqlite" }
func (*dialect) Types() sqlstore.Types        { return sqliteTypes }
func (*dialect) Rebind(q string) string       { return q }
func (*dialect) CombinedWrites() bool         { return false }
func (*dialect) Autocommit() sqlstore.Querier { return nil }
func (*dialect) LockRows() string             { return "" }
func (*dialect) ByteOrder(e string) string    { return e }

// fenceMessage is the trigger's abort message and the error it maps to.
const fenceMessage = "sync.storage.writer_fence_rejected"

func (*dialect) FenceDDL() []string {
	return []string{`CREATE TRIGGER IF NOT EXISTS sync_commits_writer_fence
BEFORE INSERT ON sync_commits FOR EACH ROW
WHEN EXISTS (SELECT 1 FROM sync_writer_fence f WHERE f.partition = NEW.partition
  AND (NEW.writer_version IS NULL OR NEW.writer_version < f.required_writer_version))
BEGIN SELECT RAISE(ABORT, '` + fenceMessage + `'); END`}
}

func (d *dialect) Begin(ctx context.Context) (sqlstore.WriteTx, error) {
	return d.w.begin(ctx)
}

// LockPartition creates the partition row; BEGIN IMMEDIATE already holds
// the database write lock.
func (*dialect) LockPartition(ctx context.Context, tx sqlstore.WriteTx, partition string) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO sync_partitions(partition) VALUES (?) ON CONFLICT (partition) DO NOTHING", partition)
	return err
}

// LockPartitionSeq implements sqlstore.GroupCommitter: LockPartition
// answering the row's seq. The no-op update makes an existing row answer
// RETURNING too; it writes the row, which the group's closeSeqs writes
// anyway once a member appends.
func (*dialect) LockPartitionSeq(ctx context.Context, tx sqlstore.WriteTx, partition string) (int64, error) {
	var seq int64
	err := tx.QueryRowContext(ctx, `INSERT INTO sync_partitions(partition) VALUES (?)
ON CONFLICT (partition) DO UPDATE SET max_commit_seq=max_commit_seq RETURNING max_commit_seq`, partition).Scan(&seq)
	return seq, err
}

func (*dialect) LockSchema(context.Context, sqlstore.WriteTx) error { return nil }

// LockSchemaWork needs no lock of its own: every DDL and migration runs in
// a BEGIN IMMEDIATE transaction, which waits (busy timeout) for another
// process's, and the migration re-reads the marker inside it.
func (*dialect) LockSchemaWork(context.Context) (func(), error) { return func() {}, nil }

func (*dialect) TableColumns(ctx context.Context, q sqlstore.Querier, table string) ([]sqlstore.PhysicalColumn, error) {
	return sqlstore.ReadColumns(ctx, q, `SELECT name, type, "notnull", pk FROM pragma_table_info(?)`, table)
}

func (*dialect) TableIndexes(ctx context.Context, q sqlstore.Querier, table string) ([]string, error) {
	return sqlstore.ReadStrings(ctx, q, `SELECT name FROM pragma_index_list(?) WHERE origin='c'`, table)
}

func (*dialect) BindValue(_ schema.ColumnType, v any) any {
	if b, ok := v.(bool); ok {
		if b {
			return int64(1)
		}
		return int64(0)
	}
	return v
}

func sqliteCode(err error) (int, string, bool) {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code(), e.Error(), true
	}
	return 0, "", false
}

func (d *dialect) ConstraintKind(err error) (string, bool) {
	code, _, ok := sqliteCode(err)
	if !ok || code&0xff != sqlite3.SQLITE_CONSTRAINT || d.FenceRejected(err) {
		return "", false
	}
	switch code {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_ROWID:
		return "unique", true
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return "foreign_key", true
	case sqlite3.SQLITE_CONSTRAINT_NOTNULL:
		return "not_null", true
	case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_DATATYPE:
		return "check", true
	}
	// Trigger aborts, commit hooks, virtual tables, functions, pinned rows
	// and a bare SQLITE_CONSTRAINT are no relational constraint of the
	// row: they stay internal errors.
	return "", false
}

func (*dialect) FenceRejected(err error) bool {
	code, msg, ok := sqliteCode(err)
	return ok && code&0xff == sqlite3.SQLITE_CONSTRAINT && strings.Contains(msg, fenceMessage)
}

// IsFull reports whether err is SQLite's SQLITE_FULL: the database
// reached Options.MaxPageCount (or the disk is full).
func IsFull(err error) bool {
	code, _, ok := sqliteCode(err)
	return ok && code&0xff == sqlite3.SQLITE_FULL
}

func (*dialect) Retryable(err error) bool {
	code, _, ok := sqliteCode(err)
	return ok && (code&0xff == sqlite3.SQLITE_BUSY || code&0xff == sqlite3.SQLITE_LOCKED)
}

// openCause names why path could not be opened: the engine's own text
// ("unable to open database file") does not say.
func openCause(path string, err error) string {
	dir := filepath.Dir(path)
	if st, serr := os.Stat(dir); serr != nil {
		return fmt.Sprintf("its directory %s: %v", dir, serr)
	} else if !st.IsDir() {
		return fmt.Sprintf("%s is not a directory", dir)
	}
	if st, serr := os.Stat(path); serr == nil && st.IsDir() {
		return "it is a directory, not a database file"
	}
	if f, oerr := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); oerr != nil {
		return oerr.Error()
	} else {
		_ = f.Close()
	}
	return err.Error()
}

// Package postgres is the production storage engine: bun + pgdialect over
// pgx's database/sql driver, for several syncd processes on one database.
// Pushes serialize per partition on the sync_partitions row (FOR UPDATE),
// seqs are allocated densely by UPDATE … RETURNING, and a plpgsql trigger
// enforces the writer fence. The engine itself is
// adapters/storage/sqlstore; this package holds the PostgreSQL dialect.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"go.opentelemetry.io/otel/trace"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// Options configure Open and New.
type Options struct {
	// DSN is a postgres:// URL or key=value string. Tables live in the
	// first schema of its search_path. pgx's default statement cache
	// mode is kept: every statement the engine runs is a fixed,
	// parameterized text, so each is prepared once per connection.
	DSN string
	// MaxConns bounds the pool (default 16, at least 2).
	MaxConns int
	// ConnMaxLifetime recycles connections (default 30m).
	ConnMaxLifetime time.Duration
	// TouchInterval: see sqlstore.Config.
	TouchInterval time.Duration
	// NewEpoch mints log epochs (default: random).
	NewEpoch func() string
	// Now: see sqlstore.Config.
	Now func() time.Time
	// PushGroup bounds group commit per partition: pushes that queue behind
	// a partition's running push share one transaction and one COMMIT (one
	// WAL flush), at most PushGroup of them (default 32, which keeps a
	// group's subtransactions within the backend's cache of 64; 1 commits
	// every push alone).
	PushGroup int
	// PushGroupOpen stops a group taking more pushes once it has been open
	// this long (default 10ms), bounding the wait of its first pushes.
	PushGroupOpen time.Duration
	// Tracer: see sqlstore.Config.
	Tracer trace.TracerProvider
	// RecentLogBytes bounds the commits kept in memory to answer pulls:
	// see sqlstore.Config.
	RecentLogBytes int64
}

// Store is the PostgreSQL storage engine.
type Store struct {
	*sqlstore.Store
	pool *sql.DB
}

var _ ports.Storage = (*Store)(nil)

// Open connects; run EnsureSchema before row work. It is New followed by
// Connect.
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

// Connect checks that the server answers.
func (s *Store) Connect(ctx context.Context) error {
	if err := s.pool.PingContext(ctx); err != nil {
		return fmt.Errorf("postgres: connect: %w", err)
	}
	return nil
}

// New prepares the pool without connecting: Connect or the first
// statement does. A server uses it to check everything else first.
func New(o Options) (*Store, error) {
	if o.DSN == "" {
		return nil, errors.New("postgres: Options.DSN is required")
	}
	// The driver parses the DSN only when it first connects: a malformed
	// one is refused here, with its password masked by the parser.
	if _, err := pgconn.ParseConfig(o.DSN); err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	pool, err := sql.Open("pgx", o.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	n := o.MaxConns
	if n <= 0 {
		n = 16
	}
	// EnsureSchema holds the schema lock on one connection while its
	// transactions run on another.
	n = max(n, 2)
	pool.SetMaxOpenConns(n)
	pool.SetMaxIdleConns(n)
	life := o.ConnMaxLifetime
	if life <= 0 {
		life = 30 * time.Minute
	}
	pool.SetConnMaxLifetime(life)
	db := bun.NewDB(pool, pgdialect.New())
	st := &Store{pool: pool}
	d := &dialect{pool: pool, group: o.PushGroup, groupOpen: o.PushGroupOpen}
	if d.group <= 0 {
		d.group = 32
	}
	if d.groupOpen <= 0 {
		d.groupOpen = 10 * time.Millisecond
	}
	st.Store = sqlstore.New(sqlstore.Config{
		Dialect: d, DB: db, ReadDB: db, Reader: pool,
		NewEpoch: o.NewEpoch, TouchInterval: o.TouchInterval, Now: o.Now, Tracer: o.Tracer, RecentLogBytes: o.RecentLogBytes,
		Close: pool.Close,
	})
	return st, nil
}

type dialect struct {
	pool      *sql.DB
	group     int
	groupOpen time.Duration
}

var pgTypes = sqlstore.Types{
	Seq: "BIGINT", Int: "INTEGER", SmallOp: "SMALLINT", JSON: "JSONB", Doc: "JSON", Blob: "BYTEA",
	Bool: "BOOLEAN", False: "FALSE", Key: `TEXT COLLATE "C"`,
	Column: func(t schema.ColumnType) string {
		switch t {
		case schema.TypeJSON:
			return "JSONB"
		case schema.TypeInteger:
			return "BIGINT"
		case schema.TypeFloat:
			return "DOUBLE PRECISION"
		case schema.TypeBoolean:
			return "BOOLEAN"
		case schema.TypeBytes, schema.TypeCRDT:
			return "BYTEA"
		}
		return "TEXT"
	},
}

func (*dialect) Name() string                   { return "postgres" }
func (*dialect) Types() sqlstore.Types          { return pgTypes }
func (*dialect) CombinedWrites() bool           { return true }
func (d *dialect) Autocommit() sqlstore.Querier { return d.pool }
func (*dialect) LockRows() string               { return " FOR UPDATE SKIP LOCKED" }
func (*dialect) ByteOrder(e string) string      { return e + ` COLLATE "C"` }

// Rebind numbers '?' placeholders ($1, $2, …). Engine statements never
// carry a literal '?'.
func (*dialect) Rebind(q string) string { return sqlstore.NumberPlaceholders(q) }

// fenceMessage is the trigger's exception text and the error it maps to.
const fenceMessage = "sync.storage.writer_fence_rejected"

func (*dialect) FenceDDL() []string {
	return []string{
		`CREATE OR REPLACE FUNCTION syncular_writer_fence() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE required BIGINT;
BEGIN
  SELECT f.required_writer_version INTO required FROM sync_writer_fence f WHERE f.partition = NEW.partition;
  IF FOUND AND (NEW.writer_version IS NULL OR NEW.writer_version < required) THEN
    RAISE EXCEPTION '` + fenceMessage + `';
  END IF;
  RETURN NEW;
END
$fn$`,
		`DO $do$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'sync_commits_writer_fence'
                 AND tgrelid = to_regclass('sync_commits')) THEN
    CREATE TRIGGER sync_commits_writer_fence BEFORE INSERT ON sync_commits
      FOR EACH ROW EXECUTE FUNCTION syncular_writer_fence();
  END IF;
END $do$`,
	}
}

func (d *dialect) Begin(ctx context.Context) (sqlstore.WriteTx, error) {
	return d.pool.BeginTx(ctx, nil)
}

// LockPartition locks the partition row FOR UPDATE, creating it first when
// missing (insert-on-conflict-do-nothing, then lock again).
func (*dialect) LockPartition(ctx context.Context, tx sqlstore.WriteTx, partition string) error {
	const lock = "SELECT max_commit_seq FROM sync_partitions WHERE partition=$1 FOR UPDATE"
	var seq int64
	err := tx.QueryRowContext(ctx, lock, partition).Scan(&seq)
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO sync_partitions(partition) VALUES ($1) ON CONFLICT (partition) DO NOTHING", partition); err != nil {
		return err
	}
	return tx.QueryRowContext(ctx, lock, partition).Scan(&seq)
}

// LockSchema is the migration barrier: an unaware writer blocks at its
// FOR UPDATE and, after the bump commits, meets the raised fence.
func (*dialect) LockSchema(ctx context.Context, tx sqlstore.WriteTx) error {
	_, err := tx.ExecContext(ctx, "LOCK TABLE sync_partitions IN EXCLUSIVE MODE")
	return err
}

// LockSchemaWork takes the session-level advisory schema lock (sqlstore.SchemaLockKey)
// on a connection of its own, so the lock spans the several transactions
// of an ensure (core DDL, migration, layout check). unlock releases it;
// when that fails the connection is discarded instead of returned to the
// pool, and closing the session releases the lock with it.
func (d *dialect) LockSchemaWork(ctx context.Context) (func(), error) {
	conn, err := d.pool.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock("+sqlstore.SchemaLockArgs+")", sqlstore.SchemaLockKey); err != nil {
		// A cancelled wait may have been granted meanwhile: never pool it.
		discardConn(conn)
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var released bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock("+sqlstore.SchemaLockArgs+")", sqlstore.SchemaLockKey).Scan(&released); err != nil || !released {
			discardConn(conn)
			return
		}
		_ = conn.Close()
	}, nil
}

// discardConn closes conn's session rather than returning it to the pool.
func discardConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// TableColumns reads the catalog through search_path (to_regclass).
func (*dialect) TableColumns(ctx context.Context, q sqlstore.Querier, table string) ([]sqlstore.PhysicalColumn, error) {
	return sqlstore.ReadColumns(ctx, q, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
  COALESCE((SELECT k.ord FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
            WHERE i.indrelid = a.attrelid AND i.indisprimary AND k.attnum = a.attnum), 0)
FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, quote(table))
}

// TableIndexes lists indexes not owned by a constraint (PRIMARY KEY, UNIQUE
// constraints can only go with their constraint).
func (*dialect) TableIndexes(ctx context.Context, q sqlstore.Querier, table string) ([]string, error) {
	return sqlstore.ReadStrings(ctx, q, `SELECT ic.relname FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
WHERE i.indrelid = to_regclass($1) AND NOT i.indisprimary
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`, quote(table))
}

// BindValue binds JSON text that does not parse as NULL (JSONB would
// refuse it; the payload keeps the verbatim value).
func (*dialect) BindValue(t schema.ColumnType, v any) any {
	if t == schema.TypeJSON {
		s, ok := v.(string)
		if !ok || !json.Valid([]byte(s)) {
			return nil
		}
	}
	return v
}

func pgCode(err error) (*pgconn.PgError, bool) {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

func (*dialect) ConstraintKind(err error) (string, bool) {
	e, ok := pgCode(err)
	if !ok || !strings.HasPrefix(e.Code, "23") {
		return "", false
	}
	switch e.Code {
	case "23505":
		return "unique", true
	case "23503", "23001":
		return "foreign_key", true
	case "23502":
		return "not_null", true
	}
	return "check", true
}

func (*dialect) FenceRejected(err error) bool {
	e, ok := pgCode(err)
	return ok && e.Code == "P0001" && e.Message == fenceMessage
}

func (*dialect) Retryable(err error) bool {
	e, ok := pgCode(err)
	return ok && (e.Code == "40001" || e.Code == "40P01")
}

// AnalyzeStatements implements sqlstore.Analyzer.
func (*dialect) AnalyzeStatements(appTables []string) []string {
	out := []string{"ANALYZE sync_row_scopes, sync_changes, sync_change_scopes, sync_commits, sync_tombstones"}
	for _, t := range appTables {
		out = append(out, "ANALYZE "+quote(t))
	}
	return out
}

// SnapshotTxOptions makes a read transaction one snapshot
// (sqlstore.SnapshotDialect): REPEATABLE READ, read only.
func (*dialect) SnapshotTxOptions() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
}

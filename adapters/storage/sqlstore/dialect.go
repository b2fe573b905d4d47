// Package sqlstore is the storage engine shared by the SQLite and
// PostgreSQL adapters: one implementation of ports.Storage over database/sql
// and bun, parameterized by a Dialect that isolates what differs between
// the engines (column types, trigger DDL, catalog reads, locking, error
// classification). The adapters in adapters/storage/sqlite and
// adapters/storage/postgres construct it.
package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/syncd-dev/syncd/domain/schema"
)

// Querier is what every statement runs on: a pool, a connection or a
// transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// WriteTx is one open write transaction on the engine's write path.
type WriteTx interface {
	Querier
	Commit() error
	Rollback() error
}

// PhysicalColumn is one column of a table as the database catalog reports it.
type PhysicalColumn struct {
	Name string
	// Type is the declared type (SQLite) or format_type (PostgreSQL).
	Type    string
	NotNull bool
	// PrimaryKeyPosition is 1-based; 0 when the column is not in the key.
	PrimaryKeyPosition int
}

// Types names the engine's SQL types for the core and app tables.
type Types struct {
	Seq     string // commit seqs, timestamps, counters
	Int     string // small integers (versions, attempts)
	SmallOp string // change op
	JSON    string // JSON the engine may normalize (stored scopes)
	Doc     string // JSON documents returned byte for byte (results, payloads)
	Blob    string // byte strings
	Bool    string
	False   string // the Bool type's false literal
	Key     string // row ids: TEXT in byte order
	// Keyed is the table option of tables keyed by their primary key,
	// with a leading space ("" for none).
	Keyed string
	// Column maps an app column type to its SQL type.
	Column func(schema.ColumnType) string
}

// SchemaLockKey is the PostgreSQL advisory lock every syncd process holds
// while it creates or checks tables: the core schema, its migration and
// layout check, and side stores' tables (the in-database segment store).
// It is the two-key lock (SchemaLockKey, hashtext(current_schema())), so
// servers whose tables live in different schemas of one database do not
// wait for each other; SchemaLockArgs renders the arguments.
const SchemaLockKey int32 = 0x73796e63 // "sync"

// SchemaLockArgs is the argument list of pg_advisory_lock and its siblings
// for the schema lock, with $1 bound to SchemaLockKey.
const SchemaLockArgs = "$1, hashtext(current_schema())"

// Dialect is everything engine-specific.
type Dialect interface {
	// Name is "sqlite" or "postgres".
	Name() string
	Types() Types
	// Rebind rewrites '?' placeholders into the engine's form.
	Rebind(query string) string
	// FenceDDL installs the writer-fence trigger on sync_commits.
	FenceDDL() []string
	// ByteOrder renders an ORDER BY expression in byte order.
	ByteOrder(expr string) string

	// Begin opens a write transaction (SQLite: BEGIN IMMEDIATE on the one
	// writer connection; PostgreSQL: a pooled transaction).
	Begin(ctx context.Context) (WriteTx, error)
	// LockPartition takes the partition write lock inside tx, creating the
	// sync_partitions row when missing.
	LockPartition(ctx context.Context, tx WriteTx, partition string) error
	// LockSchema is the first statement of a schema migration transaction.
	LockSchema(ctx context.Context, tx WriteTx) error
	// LockSchemaWork serializes schema work across processes: it returns
	// once this process holds the lock, and unlock releases it (the lock
	// must not outlive a failed call). PostgreSQL's CREATE … IF NOT EXISTS
	// races on the catalog otherwise; SQLite's BEGIN IMMEDIATE already
	// serializes every write transaction.
	LockSchemaWork(ctx context.Context) (unlock func(), err error)

	// TableColumns reads a table's physical columns (empty: no table),
	// resolving the name the way unqualified statements do.
	TableColumns(ctx context.Context, q Querier, table string) ([]PhysicalColumn, error)
	// TableIndexes lists the free-standing (not constraint-owned) indexes of a table.
	TableIndexes(ctx context.Context, q Querier, table string) ([]string, error)

	// Autocommit returns a pool on which a single write statement may run
	// outside an explicit transaction, or nil when writes must take the
	// write transaction path (SQLite's one writer).
	Autocommit() Querier
	// LockRows is the suffix that locks selected rows for update, skipping
	// rows other transactions hold ("" where writes serialize anyway).
	LockRows() string
	// CombinedWrites reports that one statement may carry several writes
	// in data-modifying CTEs (PostgreSQL), saving round trips.
	CombinedWrites() bool

	// BindValue converts a decoded cell for binding into a column of type t.
	BindValue(t schema.ColumnType, v any) any

	// ConstraintKind classifies a relational constraint failure ("unique",
	// "foreign_key", "not_null", "check"); ok is false for anything else.
	ConstraintKind(err error) (kind string, ok bool)
	// FenceRejected reports the writer-fence trigger's refusal.
	FenceRejected(err error) bool
	// Retryable reports a transient conflict (serialization failure,
	// deadlock) after which the whole transaction may be retried.
	Retryable(err error) bool
}

// Analyzer is implemented by dialects whose planner needs fresh statistics
// after bulk growth (PostgreSQL, whose autovacuum may lag a fast load by a
// minute: until then a freshly created table is planned as nearly empty).
type Analyzer interface {
	// AnalyzeStatements returns the statements refreshing the statistics
	// of the core tables and the given app tables.
	AnalyzeStatements(appTables []string) []string
}

// ReadColumns runs a catalog query returning (name, type, not null,
// primary-key position) rows.
func ReadColumns(ctx context.Context, q Querier, query string, args ...any) ([]PhysicalColumn, error) {
	var out []PhysicalColumn
	err := eachRow(ctx, q, query, args, func(scan func(...any) error) error {
		var c PhysicalColumn
		if err := scan(&c.Name, &c.Type, &c.NotNull, &c.PrimaryKeyPosition); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// ReadStrings runs a query returning one text column.
func ReadStrings(ctx context.Context, q Querier, query string, args ...any) ([]string, error) {
	var out []string
	err := eachRow(ctx, q, query, args, func(scan func(...any) error) error {
		var s string
		if err := scan(&s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

func eachRow(ctx context.Context, q Querier, query string, args []any, fn func(scan func(...any) error) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Explain runs prefix+statement for every statement of s.PlanTargets on q
// and collects the lines scan extracts from each plan row.
func (s *Store) Explain(ctx context.Context, q Querier, prefix string, stmts []Statement, scan func(func(...any) error) (string, error)) ([]string, error) {
	var out []string
	for _, st := range stmts {
		err := eachRow(ctx, q, prefix+st.SQL, st.Args, func(sc func(...any) error) error {
			line, err := scan(sc)
			out = append(out, line)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// NumberPlaceholders rewrites '?' placeholders into PostgreSQL's numbered
// form ($1, $2, …); every '?' counts as a placeholder.
func NumberPlaceholders(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

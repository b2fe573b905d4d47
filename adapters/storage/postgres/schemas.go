package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// SchemaSetOptions configure OpenSchemaSet.
type SchemaSetOptions struct {
	// DSN names the database the schemas live in (a postgres:// URL or a
	// key=value string). Its search_path is replaced for each schema.
	DSN string
	// Prefix starts the name of every schema of every set of this kind
	// (say "syncd_tc_"): lower-case letters, digits and underscores,
	// ending in an underscore. Sets with the same prefix on one database
	// find each other's leftovers by it.
	Prefix string
}

// SchemaSet is a set of throwaway schemas on one PostgreSQL database,
// each a whole syncd database (a store opened on DSN(name) keeps all its
// tables there). Its schemas are named Prefix + owner + "_" + name, the
// owner random per set, and the set holds a session advisory lock on its
// owner for its whole life: a set that opens later drops the schemas of
// every owner whose lock nobody holds (a process that crashed or was
// killed) and leaves those of live sets alone.
type SchemaSet struct {
	dsn    string
	prefix string
	owner  string // 16 hex digits
	db     *sql.DB
	lock   *sql.Conn // holds the owner lock
}

// SchemaSetConns is the most connections a SchemaSet holds: the owner
// lock's and two for schema statements.
const SchemaSetConns = 3

var (
	prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*_$`)
	namePattern   = regexp.MustCompile(`^[a-z0-9_]+$`)
)

// maxIdentifier is PostgreSQL's longest identifier (NAMEDATALEN - 1).
const maxIdentifier = 63

// OpenSchemaSet connects, takes a fresh owner's lock and drops the
// leftover schemas of dead owners, which it returns.
func OpenSchemaSet(ctx context.Context, o SchemaSetOptions) (*SchemaSet, []string, error) {
	if !prefixPattern.MatchString(o.Prefix) {
		return nil, nil, fmt.Errorf("postgres: schema prefix %q: want lower-case letters, digits and underscores, ending in '_'", o.Prefix)
	}
	if _, err := pgconn.ParseConfig(o.DSN); err != nil {
		return nil, nil, fmt.Errorf("postgres: schema set: %w", err)
	}
	db, err := sql.Open("pgx", o.DSN)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: schema set: %w", err)
	}
	db.SetMaxOpenConns(SchemaSetConns)
	db.SetMaxIdleConns(SchemaSetConns)
	s := &SchemaSet{dsn: o.DSN, prefix: o.Prefix, db: db}
	fail := func(err error) (*SchemaSet, []string, error) {
		_ = s.Close(context.Background())
		return nil, nil, fmt.Errorf("postgres: schema set: %w", err)
	}
	if s.lock, err = db.Conn(ctx); err != nil {
		return fail(err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	s.owner = fmt.Sprintf("%016x", binary.BigEndian.Uint64(b[:]))
	if _, err := s.lock.ExecContext(ctx, "SELECT pg_advisory_lock($1)", ownerKey(s.owner)); err != nil {
		return fail(err)
	}
	dropped, err := s.dropStale(ctx)
	if err != nil {
		return fail(err)
	}
	return s, dropped, nil
}

// ownerKey is the advisory lock key of an owner: its 64 bits. The
// one-key form never meets the store's two-key schema lock.
func ownerKey(owner string) int64 {
	v, _ := strconv.ParseUint(owner, 16, 64)
	return int64(v)
}

// Owner is the set's owner, the part of its schema names after the prefix.
func (s *SchemaSet) Owner() string { return s.owner }

// Schema is the full name of the set's schema name.
func (s *SchemaSet) Schema(name string) string { return s.prefix + s.owner + "_" + name }

func (s *SchemaSet) checkName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("postgres: schema name %q: want lower-case letters, digits and underscores", name)
	}
	if full := s.Schema(name); len(full) > maxIdentifier {
		return fmt.Errorf("postgres: schema name %s: longer than %d bytes", full, maxIdentifier)
	}
	return nil
}

// DSN is the set's DSN with its search_path set to the schema name.
func (s *SchemaSet) DSN(name string) (string, error) {
	if err := s.checkName(name); err != nil {
		return "", err
	}
	return WithSearchPath(s.dsn, s.Schema(name))
}

// WithSearchPath returns dsn (a URL or key=value string) with its
// search_path runtime parameter set to schema, a plain lower-case name.
func WithSearchPath(dsn, schema string) (string, error) {
	if !namePattern.MatchString(schema) {
		return "", fmt.Errorf("postgres: schema name %q: want lower-case letters, digits and underscores", schema)
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("postgres: DSN is not a URL")
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	// A later keyword wins in a key=value string.
	return strings.TrimSpace(dsn) + " search_path=" + schema, nil
}

// Create creates the empty schema name.
func (s *SchemaSet) Create(ctx context.Context, name string) error {
	if err := s.checkName(name); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "CREATE SCHEMA "+quote(s.Schema(name))); err != nil {
		return fmt.Errorf("postgres: create schema %s: %w", s.Schema(name), err)
	}
	return nil
}

// Drop drops the schema name with everything in it; a missing one is fine.
// Close the stores opened on it first: their open transactions would hold
// it back.
func (s *SchemaSet) Drop(ctx context.Context, name string) error {
	if err := s.checkName(name); err != nil {
		return err
	}
	return s.drop(ctx, s.Schema(name))
}

func (s *SchemaSet) drop(ctx context.Context, full string) error {
	if _, err := s.db.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+quote(full)+" CASCADE"); err != nil {
		return fmt.Errorf("postgres: drop schema %s: %w", full, err)
	}
	return nil
}

// Size is the bytes the schema's tables take on disk, with their indexes
// and TOAST (0 for a missing schema).
func (s *SchemaSet) Size(ctx context.Context, name string) (int64, error) {
	if err := s.checkName(name); err != nil {
		return 0, err
	}
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint
FROM pg_class c WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'm')`, quote(s.Schema(name))).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("postgres: size of schema %s: %w", s.Schema(name), err)
	}
	return n, nil
}

// CopyData replaces the rows of every table of schema to with those of
// the table of the same name in schema from, as one snapshot of from.
// Both must have the same layout (made by the same store and schema): a
// table of from missing in to is an error; a table only in to is left
// empty. Triggers do not fire (the copied rows are what they made).
func (s *SchemaSet) CopyData(ctx context.Context, from, to string) error {
	for _, n := range []string{from, to} {
		if err := s.checkName(n); err != nil {
			return err
		}
	}
	src, dst := s.Schema(from), s.Schema(to)
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return fmt.Errorf("postgres: copy schema %s to %s: %w", src, dst, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := copyTables(ctx, tx, src, dst); err != nil {
		return fmt.Errorf("postgres: copy schema %s to %s: %w", src, dst, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres: copy schema %s to %s: %w", src, dst, err)
	}
	return nil
}

func copyTables(ctx context.Context, tx *sql.Tx, src, dst string) error {
	tables := func(schema string) ([]string, error) {
		rows, err := tx.QueryContext(ctx, `SELECT c.relname FROM pg_class c
WHERE c.relnamespace = to_regnamespace($1) AND c.relkind = 'r' ORDER BY c.relname`, quote(schema))
		if err != nil {
			return nil, err
		}
		return scanStrings(rows)
	}
	from, err := tables(src)
	if err != nil {
		return err
	}
	to, err := tables(dst)
	if err != nil {
		return err
	}
	if len(from) == 0 {
		return fmt.Errorf("schema %s has no tables", src)
	}
	have := make(map[string]bool, len(to))
	qualified := make([]string, 0, len(to))
	for _, t := range to {
		have[t] = true
		qualified = append(qualified, quote(dst)+"."+quote(t))
	}
	for _, t := range from {
		if !have[t] {
			return fmt.Errorf("table %s of %s is missing in %s", t, src, dst)
		}
	}
	if len(qualified) > 0 {
		if _, err := tx.ExecContext(ctx, "TRUNCATE "+strings.Join(qualified, ", ")); err != nil {
			return err
		}
	}
	for _, t := range from {
		rows, err := tx.QueryContext(ctx, `SELECT a.attname FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
ORDER BY a.attnum`, quote(src)+"."+quote(t))
		if err != nil {
			return err
		}
		cols, err := scanStrings(rows)
		if err != nil {
			return err
		}
		for i, c := range cols {
			cols[i] = quote(c)
		}
		list := strings.Join(cols, ", ")
		target := quote(dst) + "." + quote(t)
		for _, stmt := range []string{
			"ALTER TABLE " + target + " DISABLE TRIGGER USER",
			"INSERT INTO " + target + " (" + list + ") SELECT " + list + " FROM " + quote(src) + "." + quote(t),
			"ALTER TABLE " + target + " ENABLE TRIGGER USER",
		} {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("table %s: %w", t, err)
			}
		}
	}
	return nil
}

func scanStrings(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Schemas lists the set's own schemas, full names in order.
func (s *SchemaSet) Schemas(ctx context.Context) ([]string, error) {
	return s.list(ctx, s.prefix+s.owner+"_")
}

// list returns the schemas whose names start with prefix, in order.
func (s *SchemaSet) list(ctx context.Context, prefix string) ([]string, error) {
	// Names are checked: no LIKE wildcard but '_', escaped here.
	rows, err := s.db.QueryContext(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE $1 ORDER BY nspname`,
		strings.ReplaceAll(prefix, "_", `\_`)+"%")
	if err != nil {
		return nil, err
	}
	return scanStrings(rows)
}

// dropStale drops the schemas of owners whose lock no session holds. It
// takes each such owner's lock for the drop, so an owner is never judged
// dead while it lives.
func (s *SchemaSet) dropStale(ctx context.Context) ([]string, error) {
	all, err := s.list(ctx, s.prefix)
	if err != nil {
		return nil, err
	}
	owners := map[string][]string{}
	var order []string
	for _, full := range all {
		rest := strings.TrimPrefix(full, s.prefix)
		if len(rest) < 17 || rest[16] != '_' {
			continue // not a set's schema
		}
		owner := rest[:16]
		if _, err := strconv.ParseUint(owner, 16, 64); err != nil || owner == s.owner {
			continue
		}
		if owners[owner] == nil {
			order = append(order, owner)
		}
		owners[owner] = append(owners[owner], full)
	}
	var dropped []string
	for _, owner := range order {
		var free bool
		if err := s.lock.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", ownerKey(owner)).Scan(&free); err != nil {
			return dropped, err
		}
		if !free {
			continue // its set is alive
		}
		for _, full := range owners[owner] {
			if err := s.drop(ctx, full); err != nil {
				_, _ = s.lock.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", ownerKey(owner))
				return dropped, err
			}
			dropped = append(dropped, full)
		}
		if _, err := s.lock.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", ownerKey(owner)); err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// FreeConns is what the server has left for new connections now:
// max_connections less the superuser reserve and the sessions open.
func (s *SchemaSet) FreeConns(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT current_setting('max_connections')::int
  - current_setting('superuser_reserved_connections')::int
  - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int`).Scan(&n)
	return n, err
}

// Close drops the set's remaining schemas, releases its owner lock and
// closes its connections. Schemas it cannot drop stay, for the next set
// to find.
func (s *SchemaSet) Close(ctx context.Context) error {
	var errs []error
	if s.lock != nil && s.owner != "" {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		left, err := s.Schemas(ctx)
		errs = append(errs, err)
		for _, full := range left {
			errs = append(errs, s.drop(ctx, full))
		}
	}
	if s.lock != nil {
		// Closing the session releases the lock with it.
		discardConn(s.lock)
	}
	errs = append(errs, s.db.Close())
	return errors.Join(errs...)
}

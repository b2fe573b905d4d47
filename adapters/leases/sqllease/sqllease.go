// Package sqllease keeps auth leases (SPEC §7.3) in the sync database
// (SQLite or PostgreSQL), beside the storage engine's tables and over its
// handle:
//
//	sync_leases(partition, client_id, lease_id, actor_id, allowed_scopes,
//	  issued_at_ms, expires_at_ms, revoked, signature; PK(partition, client_id))
//	sync_lease_revocations(partition, lease_id, revoked_at_ms; PK(partition, lease_id))
//
// the reference layout with the record's seal added (and an index on the
// expiry for pruning). Every write is one
// autocommit statement except a revocation (list entry and mark in one
// transaction); PutLease is a compare-and-set on the lease read, so a
// refresh racing a revocation never clears it.
package sqllease

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

// Options configure a Store.
type Options struct {
	// DB is the storage engine's write-path handle (sqlstore.Store.DB).
	DB *bun.DB
	// ReadDB, when set, serves GetLease (sqlstore.Store.ReadDB: SQLite's
	// read pool), keeping the one SQLite writer connection for writes.
	ReadDB *bun.DB
	// Now stamps revocations (unix milliseconds; default: 0, no stamp).
	Now func() int64
}

// Store is an in-database ports.LeaseStore.
type Store struct {
	db  *sql.DB
	rd  *sql.DB
	pg  bool
	now func() int64

	get, insert, update, revoke, mark, pruneLeases, pruneRevocations string
}

var _ ports.LeaseStore = (*Store)(nil)

// Open creates the lease tables when missing and returns the store.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.DB == nil {
		return nil, errors.New("sqllease: Options.DB is required")
	}
	s := &Store{db: o.DB.DB, rd: o.DB.DB, pg: o.DB.Dialect().Name() == dialect.PG, now: o.Now}
	if o.ReadDB != nil {
		s.rd = o.ReadDB.DB
	}
	if s.now == nil {
		s.now = func() int64 { return 0 }
	}
	s.get = s.q(`SELECT l.lease_id, l.actor_id, l.allowed_scopes, l.issued_at_ms, l.expires_at_ms, l.signature,
  l.revoked <> 0 OR EXISTS (SELECT 1 FROM sync_lease_revocations r WHERE r.partition = l.partition AND r.lease_id = l.lease_id)
FROM sync_leases l WHERE l.partition = ? AND l.client_id = ?`)
	// Both writes refuse an id on the revocation list; the update only
	// replaces the lease that was read.
	// PostgreSQL types a bare parameter of a SELECT list as text.
	values := "?, ?, ?, ?, ?, ?, ?, 0, ?"
	if s.pg {
		values = "?::text, ?::text, ?::text, ?::text, ?::text, ?::bigint, ?::bigint, 0, ?::bytea"
	}
	s.insert = s.q(`INSERT INTO sync_leases(partition, client_id, lease_id, actor_id, allowed_scopes,
  issued_at_ms, expires_at_ms, revoked, signature)
SELECT ` + values + `
WHERE NOT EXISTS (SELECT 1 FROM sync_lease_revocations WHERE partition = ? AND lease_id = ?)
ON CONFLICT(partition, client_id) DO NOTHING`)
	s.update = s.q(`UPDATE sync_leases SET lease_id = ?, actor_id = ?, allowed_scopes = ?,
  issued_at_ms = ?, expires_at_ms = ?, revoked = 0, signature = ?
WHERE partition = ? AND client_id = ? AND lease_id = ? AND signature = ? AND revoked = ?
  AND NOT EXISTS (SELECT 1 FROM sync_lease_revocations WHERE partition = ? AND lease_id = ?)`)
	s.revoke = s.q(`INSERT INTO sync_lease_revocations(partition, lease_id, revoked_at_ms) VALUES(?, ?, ?)
ON CONFLICT(partition, lease_id) DO NOTHING`)
	s.mark = s.q(`UPDATE sync_leases SET revoked = 1 WHERE partition = ? AND lease_id = ?`)
	s.pruneLeases = s.q(`DELETE FROM sync_leases WHERE (partition, client_id) IN (
  SELECT partition, client_id FROM sync_leases WHERE expires_at_ms < ? LIMIT ?)`)
	s.pruneRevocations = s.q(`DELETE FROM sync_lease_revocations WHERE (partition, lease_id) IN (
  SELECT r.partition, r.lease_id FROM sync_lease_revocations r WHERE r.revoked_at_ms < ?
    AND NOT EXISTS (SELECT 1 FROM sync_leases l WHERE l.partition = r.partition AND l.lease_id = r.lease_id)
  LIMIT ?)`)
	if err := s.createTables(ctx); err != nil {
		return nil, fmt.Errorf("sqllease: create tables: %w", err)
	}
	return s, nil
}

// leaseObjects are the tables and indexes ddl creates.
var leaseObjects = []string{"sync_leases", "sync_leases_by_id", "sync_leases_expiry", "sync_lease_revocations"}

// createTables runs the DDL in one transaction under the schema lock the
// storage engine's migration holds, as the other side stores do; a
// database that has every object already takes no lock.
func (s *Store) createTables(ctx context.Context) error {
	return sqlstore.CreateSideTables(ctx, s.db, s.pg, leaseObjects, s.ddl())
}

func (s *Store) ddl() []string {
	i64, flag, blob := "INTEGER", "INTEGER", "BLOB"
	if s.pg {
		i64, flag, blob = "BIGINT", "SMALLINT", "BYTEA"
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS sync_leases(
  partition TEXT NOT NULL, client_id TEXT NOT NULL,
  lease_id TEXT NOT NULL, actor_id TEXT NOT NULL,
  allowed_scopes TEXT NOT NULL,
  issued_at_ms ` + i64 + ` NOT NULL, expires_at_ms ` + i64 + ` NOT NULL,
  revoked ` + flag + ` NOT NULL DEFAULT 0,
  signature ` + blob + ` NOT NULL,
  PRIMARY KEY(partition, client_id)
)`,
		`CREATE INDEX IF NOT EXISTS sync_leases_by_id ON sync_leases(partition, lease_id)`,
		`CREATE INDEX IF NOT EXISTS sync_leases_expiry ON sync_leases(expires_at_ms)`,
		`CREATE TABLE IF NOT EXISTS sync_lease_revocations(
  partition TEXT NOT NULL, lease_id TEXT NOT NULL,
  revoked_at_ms ` + i64 + ` NOT NULL,
  PRIMARY KEY(partition, lease_id)
)`,
	}
}

// q rewrites '?' placeholders for PostgreSQL.
func (s *Store) q(query string) string {
	if !s.pg {
		return query
	}
	return sqlstore.NumberPlaceholders(query)
}

// GetLease implements ports.LeaseStore.
func (s *Store) GetLease(ctx context.Context, partition, clientID string) (*lease.Stored, error) {
	st := &lease.Stored{Record: lease.Record{Partition: partition, ClientID: clientID}}
	var allowed string
	err := s.rd.QueryRowContext(ctx, s.get, partition, clientID).Scan(&st.LeaseID, &st.ActorID, &allowed,
		&st.IssuedAtMs, &st.ExpiresAtMs, &st.Signature, &st.Revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqllease: read lease: %w", err)
	}
	if err := json.Unmarshal([]byte(allowed), &st.AllowedScopes); err != nil {
		// Unreadable at rest: what its seal would say is moot.
		return nil, fmt.Errorf("sqllease: stored allowed scopes: %w", err)
	}
	if st.AllowedScopes == nil {
		st.AllowedScopes = scopes.Allowed{}
	}
	return st, nil
}

// PutLease implements ports.LeaseStore.
func (s *Store) PutLease(ctx context.Context, prev *lease.Stored, next lease.Stored) (bool, error) {
	allowed := next.AllowedScopes
	if allowed == nil {
		allowed = scopes.Allowed{}
	}
	// encoding/json keeps each value list in order: the record reads
	// back exactly as sealed.
	b, err := json.Marshal(allowed)
	if err != nil {
		return false, fmt.Errorf("sqllease: encode allowed scopes: %w", err)
	}
	var res sql.Result
	if prev == nil {
		res, err = s.db.ExecContext(ctx, s.insert, next.Partition, next.ClientID, next.LeaseID, next.ActorID, string(b),
			next.IssuedAtMs, next.ExpiresAtMs, next.Signature, next.Partition, next.LeaseID)
	} else {
		res, err = s.db.ExecContext(ctx, s.update, next.LeaseID, next.ActorID, string(b), next.IssuedAtMs, next.ExpiresAtMs,
			next.Signature, next.Partition, next.ClientID, prev.LeaseID, prev.Signature, flag(prev.Revoked),
			next.Partition, next.LeaseID)
	}
	if err != nil {
		return false, fmt.Errorf("sqllease: store lease: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqllease: store lease: %w", err)
	}
	return n == 1, nil
}

// RevokeLease implements ports.LeaseStore.
func (s *Store) RevokeLease(ctx context.Context, partition, leaseID string) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("sqllease: revoke: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, s.revoke, partition, leaseID, s.now()); err != nil {
		return false, fmt.Errorf("sqllease: revoke: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.mark, partition, leaseID)
	if err != nil {
		return false, fmt.Errorf("sqllease: revoke: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqllease: revoke: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("sqllease: revoke: %w", err)
	}
	return n > 0, nil
}

// PruneLeases implements ports.LeaseStore: two bounded autocommit
// deletes, expired leases first, so the revocations they alone carried
// go in the same pass.
func (s *Store) PruneLeases(ctx context.Context, q ports.LeasePrune) (ports.LeasePruneCounts, error) {
	var out ports.LeasePruneCounts
	if q.Limit <= 0 {
		return out, nil
	}
	for _, step := range []struct {
		query string
		at    int64
		n     *int
	}{{s.pruneLeases, q.ExpiredBeforeMs, &out.Leases}, {s.pruneRevocations, q.RevokedBeforeMs, &out.Revocations}} {
		res, err := s.db.ExecContext(ctx, step.query, step.at, q.Limit)
		if err != nil {
			return out, fmt.Errorf("sqllease: prune: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return out, fmt.Errorf("sqllease: prune: %w", err)
		}
		*step.n = int(n)
		out.MayHaveMore = out.MayHaveMore || int(n) == q.Limit
	}
	return out, nil
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

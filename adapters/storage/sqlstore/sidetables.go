package sqlstore

import (
	"context"
	"database/sql"
	"strings"
)

// CreateSideTables creates a side store's tables (segments, blobs,
// leases: stores that keep their own tables in the sync database) in one
// transaction under the schema lock the engine's migration holds, so two
// processes never race on the DDL (PostgreSQL's IF NOT EXISTS is not safe
// against a concurrent twin; a SQLite writer handle begins IMMEDIATE). A
// database that has every object already, as on any restart, takes no
// lock: a node never waits behind another's migration.
func CreateSideTables(ctx context.Context, db *sql.DB, pg bool, objects, ddl []string) error {
	if ok, err := haveObjects(ctx, db, pg, objects); err != nil || ok {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if pg {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock("+SchemaLockArgs+")", SchemaLockKey); err != nil {
			return err
		}
	}
	for _, q := range ddl {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// haveObjects reports whether every named table and index exists.
func haveObjects(ctx context.Context, db *sql.DB, pg bool, objects []string) (bool, error) {
	var n int
	var err error
	if pg {
		err = db.QueryRowContext(ctx, `SELECT count(*) FROM unnest($1::text[]) AS o(name) WHERE to_regclass(o.name) IS NOT NULL`,
			objects).Scan(&n)
	} else {
		args := make([]any, len(objects))
		for i, o := range objects {
			args[i] = o
		}
		err = db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name IN (`+
			strings.TrimSuffix(strings.Repeat("?,", len(objects)), ",")+`)`, args...).Scan(&n)
	}
	return n == len(objects), err
}

package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
	"github.com/syncd-dev/syncd/test/pgtest"
)

// Engine is the PostgreSQL engine for the shared tests; every database is
// a fresh schema of the test database.
func Engine() storetest.Engine {
	open, reopen := storetest.Opener(func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
		s, err := postgres.Open(ctx, postgres.Options{DSN: dsn, MaxConns: 8})
		if err != nil {
			return nil, err
		}
		return s.Store, nil
	}, func(t testing.TB) string { return pgtest.DSN(t) })
	return storetest.Engine{
		Open: open, Reopen: reopen,
		Exec: func(ctx context.Context, s *sqlstore.Store, q string, args ...any) error {
			_, err := s.DB().DB.ExecContext(ctx, s.Dialect().Rebind(q), args...)
			return err
		},
		Plans:    postgres.Plans,
		FullScan: postgres.FullScan,
	}
}

func TestEngine(t *testing.T) { storetest.Run(t, Engine()) }

func BenchmarkPushAppend(b *testing.B) { storetest.BenchPushAppend(b, Engine()) }
func BenchmarkPushAppendParallel(b *testing.B) {
	storetest.BenchPushAppendParallel(b, Engine())
}
func BenchmarkWindowRead(b *testing.B) { storetest.BenchWindowRead(b, Engine()) }
func BenchmarkScanRows(b *testing.B)   { storetest.BenchScanRows(b, Engine()) }
func BenchmarkSeed100k(b *testing.B)   { storetest.BenchSeed(b, Engine(), 100_000) }

// heldSchemaLocks counts sessions holding this schema's advisory schema lock.
func heldSchemaLocks(t *testing.T, s *sqlstore.Store) int {
	t.Helper()
	var n int
	if err := s.DB().DB.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 2
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid::bigint = $1 AND objid::bigint = (hashtext(current_schema())::bigint & 4294967295)`,
		sqlstore.SchemaLockKey).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSchemaLock: EnsureSchema waits for the schema lock another node
// holds, and releases it on every path: after success and after a
// refusal, so a later node (or this node's retry) is never stuck behind it.
func TestSchemaLock(t *testing.T) {
	ctx := t.Context()
	e := Engine()
	v2 := e.Open(t)
	if err := v2.EnsureSchema(ctx, storetest.Schema(t, storetest.IRv2), nil); err != nil {
		t.Fatal(err)
	}
	if n := heldSchemaLocks(t, v2); n != 0 {
		t.Fatalf("%d sessions hold the schema lock after a successful ensure", n)
	}
	// A node still running version 1 is refused, and lets go of the lock.
	if err := e.Reopen(t, v2).EnsureSchema(ctx, storetest.Schema(t, storetest.IR), nil); err == nil {
		t.Fatal("version 1 ensured over a version 2 database")
	}
	if n := heldSchemaLocks(t, v2); n != 0 {
		t.Fatalf("%d sessions hold the schema lock after a refused ensure", n)
	}
	// While another session holds the lock, a fresh node's ensure waits
	// (its backend queues on the lock) and completes once it is released.
	holder, err := v2.DB().DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Close() }()
	lock := func(fn string) {
		if _, err := holder.ExecContext(ctx, "SELECT "+fn+"("+sqlstore.SchemaLockArgs+")", sqlstore.SchemaLockKey); err != nil {
			t.Fatal(err)
		}
	}
	lock("pg_advisory_lock")
	next := e.Reopen(t, v2)
	done := make(chan error, 1)
	go func() { done <- next.EnsureSchema(ctx, storetest.Schema(t, storetest.IRv2), nil) }()
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			t.Fatalf("EnsureSchema ran while another node held the schema lock (%v)", err)
		default:
		}
		if err := v2.DB().DB.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND objsubid = 2
  AND classid::bigint = $1 AND objid::bigint = (hashtext(current_schema())::bigint & 4294967295))`,
			sqlstore.SchemaLockKey).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	lock("pg_advisory_unlock")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := heldSchemaLocks(t, v2); n != 0 {
		t.Fatalf("%d sessions hold the schema lock after the waiting ensure", n)
	}
}

// A one-connection pool still ensures its schema: the schema lock holds a
// connection of its own, so the pool keeps at least two.
func TestEnsureSchemaWithOneConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, postgres.Options{DSN: pgtest.DSN(t), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.EnsureSchema(ctx, storetest.Schema(t, storetest.IR), nil); err != nil {
		t.Fatal(err)
	}
}

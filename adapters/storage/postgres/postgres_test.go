package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
)

var (
	mu   sync.Mutex
	dsns = map[*sqlstore.Store]string{}
)

func openAt(t testing.TB, dsn string) *sqlstore.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	mu.Lock()
	dsns[s.Store] = dsn
	mu.Unlock()
	return s.Store
}

// Engine is the PostgreSQL engine for the shared tests.
func Engine() storetest.Engine {
	return storetest.Engine{
		Open: func(t testing.TB) *sqlstore.Store { return openAt(t, pgtest.DSN(t)) },
		Reopen: func(t testing.TB, s *sqlstore.Store) *sqlstore.Store {
			mu.Lock()
			dsn := dsns[s]
			mu.Unlock()
			return openAt(t, dsn)
		},
		Exec: func(ctx context.Context, s *sqlstore.Store, q string, args ...any) error {
			_, err := s.DB().DB.ExecContext(ctx, s.Dialect().Rebind(q), args...)
			return err
		},
		Plans: func(ctx context.Context, s *sqlstore.Store, p string, w ports.CommitWindow, q ports.RowScan) ([]string, error) {
			return postgres.Plans(ctx, s, p, w, q)
		},
		FullScan: postgres.FullScan,
	}
}

func TestEngine(t *testing.T) { storetest.Run(t, Engine()) }

func BenchmarkPushAppend(b *testing.B) { storetest.BenchPushAppend(b, Engine()) }
func BenchmarkWindowRead(b *testing.B) { storetest.BenchWindowRead(b, Engine()) }
func BenchmarkScanRows(b *testing.B)   { storetest.BenchScanRows(b, Engine()) }
func BenchmarkSeed100k(b *testing.B)   { storetest.BenchSeed(b, Engine(), 100_000) }

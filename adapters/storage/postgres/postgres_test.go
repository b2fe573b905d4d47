package postgres_test

import (
	"context"
	"testing"

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
func BenchmarkWindowRead(b *testing.B) { storetest.BenchWindowRead(b, Engine()) }
func BenchmarkScanRows(b *testing.B)   { storetest.BenchScanRows(b, Engine()) }
func BenchmarkSeed100k(b *testing.B)   { storetest.BenchSeed(b, Engine(), 100_000) }

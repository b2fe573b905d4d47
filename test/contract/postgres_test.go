package contract_test

import (
	"context"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/contract"
	"github.com/syncd-dev/syncd/test/pgtest"
)

func TestPostgres(t *testing.T) {
	var mu sync.Mutex
	dsns := map[ports.Storage]string{}
	open := func(t *testing.T, dsn string) ports.Storage {
		s, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		mu.Lock()
		dsns[s] = dsn
		mu.Unlock()
		return s
	}
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) ports.Storage { return open(t, pgtest.DSN(t)) },
		Reopen: func(t *testing.T, s ports.Storage) ports.Storage {
			mu.Lock()
			dsn := dsns[s]
			mu.Unlock()
			return open(t, dsn)
		},
		Engine: &contract.Engine{
			Dialect: "postgres",
			Exec: func(ctx context.Context, s ports.Storage, q string, args ...any) error {
				ps := s.(*postgres.Store)
				_, err := ps.DB().DB.ExecContext(ctx, ps.Dialect().Rebind(q), args...)
				return err
			},
			Plans: func(ctx context.Context, s ports.Storage, p string, w ports.CommitWindow, q ports.RowScan) ([]string, error) {
				return postgres.Plans(ctx, s.(*postgres.Store).Store, p, w, q)
			},
		},
	})
}

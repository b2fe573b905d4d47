package contract_test

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/contract"
	"github.com/syncd-dev/syncd/test/pgtest"
)

func TestPostgres(t *testing.T) {
	r := newReopener(func(ctx context.Context, dsn string) (ports.Storage, error) {
		return postgres.Open(ctx, postgres.Options{DSN: dsn, MaxConns: 8})
	})
	contract.Run(t, contract.Harness{
		New:    func(t *testing.T) ports.Storage { return r.at(t, pgtest.DSN(t)) },
		Reopen: r.reopen,
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

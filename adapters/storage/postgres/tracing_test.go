package postgres_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
	"github.com/syncd-dev/syncd/test/pgtest"
)

func TestTracing(t *testing.T) {
	storetest.Tracing(t, "postgresql", func(t testing.TB, tp trace.TracerProvider) *sqlstore.Store {
		s, err := postgres.Open(context.Background(), postgres.Options{DSN: pgtest.DSN(t), MaxConns: 4, Tracer: tp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s.Store
	})
}

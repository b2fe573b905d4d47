package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
)

func TestTracing(t *testing.T) {
	storetest.Tracing(t, "sqlite", func(t testing.TB, tp trace.TracerProvider) *sqlstore.Store {
		s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "t.db"), Tracer: tp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s.Store
	})
}

package contract_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/contract"
)

func TestSQLite(t *testing.T) {
	var mu sync.Mutex
	paths := map[ports.Storage]string{}
	open := func(t *testing.T, path string) ports.Storage {
		s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		mu.Lock()
		paths[s] = path
		mu.Unlock()
		return s
	}
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) ports.Storage { return open(t, filepath.Join(t.TempDir(), "sync.db")) },
		Reopen: func(t *testing.T, s ports.Storage) ports.Storage {
			mu.Lock()
			p := paths[s]
			mu.Unlock()
			return open(t, p)
		},
		SharedWriter: true,
		Engine: &contract.Engine{
			Dialect: "sqlite",
			Exec: func(ctx context.Context, s ports.Storage, q string, args ...any) error {
				_, err := s.(*sqlite.Store).DB().DB.ExecContext(ctx, q, args...)
				return err
			},
			Plans: func(ctx context.Context, s ports.Storage, p string, w ports.CommitWindow, q ports.RowScan) ([]string, error) {
				return sqlite.Plans(ctx, s.(*sqlite.Store).Store, p, w, q)
			},
		},
	})
}

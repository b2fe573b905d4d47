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

// reopener remembers which database (file or DSN) each opened storage
// uses, so Harness.Reopen can open a second storage over it.
type reopener struct {
	mu    sync.Mutex
	where map[ports.Storage]string
	open  func(ctx context.Context, where string) (ports.Storage, error)
}

func newReopener(open func(ctx context.Context, where string) (ports.Storage, error)) *reopener {
	return &reopener{where: map[ports.Storage]string{}, open: open}
}

func (r *reopener) at(t *testing.T, where string) ports.Storage {
	t.Helper()
	s, err := r.open(context.Background(), where)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r.mu.Lock()
	r.where[s] = where
	r.mu.Unlock()
	return s
}

func (r *reopener) reopen(t *testing.T, s ports.Storage) ports.Storage {
	r.mu.Lock()
	where := r.where[s]
	r.mu.Unlock()
	return r.at(t, where)
}

func TestSQLite(t *testing.T) {
	r := newReopener(func(ctx context.Context, path string) (ports.Storage, error) {
		return sqlite.Open(ctx, sqlite.Options{Path: path})
	})
	contract.Run(t, contract.Harness{
		New:          func(t *testing.T) ports.Storage { return r.at(t, filepath.Join(t.TempDir(), "sync.db")) },
		Reopen:       r.reopen,
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

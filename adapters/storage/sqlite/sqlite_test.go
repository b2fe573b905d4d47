package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
	"github.com/syncd-dev/syncd/ports"
)

func openAt(t testing.TB, path string) *sqlstore.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.Store
}

var paths = map[*sqlstore.Store]string{}

// Engine is the SQLite engine for the shared tests.
func Engine() storetest.Engine {
	return storetest.Engine{
		Open: func(t testing.TB) *sqlstore.Store {
			p := filepath.Join(t.TempDir(), "sync.db")
			s := openAt(t, p)
			paths[s] = p
			return s
		},
		Reopen: func(t testing.TB, s *sqlstore.Store) *sqlstore.Store {
			s2 := openAt(t, paths[s])
			paths[s2] = paths[s]
			return s2
		},
		Exec: func(ctx context.Context, s *sqlstore.Store, q string, args ...any) error {
			_, err := s.DB().DB.ExecContext(ctx, q, args...)
			return err
		},
		Plans: func(ctx context.Context, s *sqlstore.Store, p string, w ports.CommitWindow, q ports.RowScan) ([]string, error) {
			return sqlite.Plans(ctx, s, p, w, q)
		},
		FullScan: sqlite.FullScan,
	}
}

func TestEngine(t *testing.T) { storetest.Run(t, Engine()) }

func BenchmarkPushAppend(b *testing.B) { storetest.BenchPushAppend(b, Engine()) }
func BenchmarkWindowRead(b *testing.B) { storetest.BenchWindowRead(b, Engine()) }
func BenchmarkScanRows(b *testing.B)   { storetest.BenchScanRows(b, Engine()) }
func BenchmarkSeed100k(b *testing.B)   { storetest.BenchSeed(b, Engine(), 100_000) }

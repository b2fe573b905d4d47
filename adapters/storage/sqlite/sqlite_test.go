package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
)

// Engine is the SQLite engine for the shared tests.
func Engine() storetest.Engine { return engineWith(sqlite.Options{}) }

// engineWith is the engine opening its stores with o (and a path of
// their own).
func engineWith(o sqlite.Options) storetest.Engine {
	open, reopen := storetest.Opener(func(ctx context.Context, path string) (*sqlstore.Store, error) {
		o.Path = path
		s, err := sqlite.Open(ctx, o)
		if err != nil {
			return nil, err
		}
		return s.Store, nil
	}, func(t testing.TB) string { return filepath.Join(t.TempDir(), "sync.db") })
	return storetest.Engine{
		Open: open, Reopen: reopen,
		Exec: func(ctx context.Context, s *sqlstore.Store, q string, args ...any) error {
			_, err := s.DB().DB.ExecContext(ctx, q, args...)
			return err
		},
		Plans:    sqlite.Plans,
		FullScan: sqlite.FullScan,
	}
}

func TestEngine(t *testing.T) { storetest.Run(t, Engine()) }

func BenchmarkPushAppend(b *testing.B) { storetest.BenchPushAppend(b, Engine()) }
func BenchmarkWindowRead(b *testing.B) { storetest.BenchWindowRead(b, Engine()) }
func BenchmarkScanRows(b *testing.B)   { storetest.BenchScanRows(b, Engine()) }
func BenchmarkSeed100k(b *testing.B)   { storetest.BenchSeed(b, Engine(), 100_000) }
func BenchmarkRequestHead(b *testing.B) {
	storetest.BenchRequestHead(b, engineWith(sqlite.Options{TouchInterval: time.Hour}))
}

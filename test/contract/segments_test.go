package contract_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/segments/fsseg"
	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/adapters/segments/sqlseg"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/contract"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/uptrace/bun"
)

func TestSegmentsMemory(t *testing.T) {
	contract.RunSegments(t, contract.SegmentHarness{
		New: func(*testing.T) ports.SegmentStore { return memseg.New() },
	})
}

func TestSegmentsFilesystem(t *testing.T) {
	contract.RunSegments(t, reopenableSegments(
		func(t *testing.T) string { return filepath.Join(t.TempDir(), "segments") },
		func(t *testing.T, dir string) ports.SegmentStore {
			s, err := fsseg.Open(fsseg.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}))
}

func TestSegmentsSQLite(t *testing.T) {
	contract.RunSegments(t, reopenableSegments(
		func(t *testing.T) string { return filepath.Join(t.TempDir(), "sync.db") },
		func(t *testing.T, path string) ports.SegmentStore {
			st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return openSQLSegments(t, st.DB(), st.ReadDB())
		}))
}

func TestSegmentsPostgres(t *testing.T) {
	contract.RunSegments(t, reopenableSegments(
		func(t *testing.T) string { return pgtest.DSN(t) },
		func(t *testing.T, dsn string) ports.SegmentStore {
			st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return openSQLSegments(t, st.DB(), st.ReadDB())
		}))
}

// reopenableSegments is a harness whose stores open at a location fresh
// makes, and reopen at the location of the store they stand in for.
func reopenableSegments(fresh func(t *testing.T) string, open func(t *testing.T, loc string) ports.SegmentStore) contract.SegmentHarness {
	var mu sync.Mutex
	locs := map[ports.SegmentStore]string{}
	openAt := func(t *testing.T, loc string) ports.SegmentStore {
		s := open(t, loc)
		mu.Lock()
		locs[s] = loc
		mu.Unlock()
		return s
	}
	return contract.SegmentHarness{
		New: func(t *testing.T) ports.SegmentStore { return openAt(t, fresh(t)) },
		Reopen: func(t *testing.T, s ports.SegmentStore) ports.SegmentStore {
			mu.Lock()
			loc := locs[s]
			mu.Unlock()
			return openAt(t, loc)
		},
	}
}

// openSQLSegments opens the database segment store over db and readDB.
func openSQLSegments(t *testing.T, db, readDB *bun.DB) ports.SegmentStore {
	s, err := sqlseg.Open(context.Background(), sqlseg.Options{DB: db, ReadDB: readDB})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

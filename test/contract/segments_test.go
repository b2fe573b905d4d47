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
)

func TestSegmentsMemory(t *testing.T) {
	contract.RunSegments(t, contract.SegmentHarness{
		New: func(*testing.T) ports.SegmentStore { return memseg.New() },
	})
}

func TestSegmentsFilesystem(t *testing.T) {
	var mu sync.Mutex
	dirs := map[ports.SegmentStore]string{}
	open := func(t *testing.T, dir string) ports.SegmentStore {
		s, err := fsseg.Open(fsseg.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		dirs[s] = dir
		mu.Unlock()
		return s
	}
	contract.RunSegments(t, contract.SegmentHarness{
		New: func(t *testing.T) ports.SegmentStore { return open(t, filepath.Join(t.TempDir(), "segments")) },
		Reopen: func(t *testing.T, s ports.SegmentStore) ports.SegmentStore {
			mu.Lock()
			d := dirs[s]
			mu.Unlock()
			return open(t, d)
		},
	})
}

func TestSegmentsSQLite(t *testing.T) {
	var mu sync.Mutex
	paths := map[ports.SegmentStore]string{}
	open := func(t *testing.T, path string) ports.SegmentStore {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		s, err := sqlseg.Open(context.Background(), sqlseg.Options{DB: st.DB(), ReadDB: st.ReadDB()})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		paths[s] = path
		mu.Unlock()
		return s
	}
	contract.RunSegments(t, contract.SegmentHarness{
		New: func(t *testing.T) ports.SegmentStore { return open(t, filepath.Join(t.TempDir(), "sync.db")) },
		Reopen: func(t *testing.T, s ports.SegmentStore) ports.SegmentStore {
			mu.Lock()
			p := paths[s]
			mu.Unlock()
			return open(t, p)
		},
	})
}

func TestSegmentsPostgres(t *testing.T) {
	var mu sync.Mutex
	dsns := map[ports.SegmentStore]string{}
	open := func(t *testing.T, dsn string) ports.SegmentStore {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		s, err := sqlseg.Open(context.Background(), sqlseg.Options{DB: st.DB(), ReadDB: st.ReadDB()})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		dsns[s] = dsn
		mu.Unlock()
		return s
	}
	contract.RunSegments(t, contract.SegmentHarness{
		New: func(t *testing.T) ports.SegmentStore { return open(t, pgtest.DSN(t)) },
		Reopen: func(t *testing.T, s ports.SegmentStore) ports.SegmentStore {
			mu.Lock()
			d := dsns[s]
			mu.Unlock()
			return open(t, d)
		},
	})
}

package contract_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/syncd-dev/syncd/adapters/leases/memlease"
	"github.com/syncd-dev/syncd/adapters/leases/sqllease"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/contract"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/uptrace/bun"
)

func TestLeasesMemory(t *testing.T) {
	contract.RunLeases(t, contract.LeaseHarness{
		New:        func(*testing.T) ports.LeaseStore { return memlease.New() },
		NewClocked: func(_ *testing.T, now func() int64) ports.LeaseStore { return memlease.NewWithClock(now) },
	})
}

func TestLeasesSQLite(t *testing.T) {
	contract.RunLeases(t, reopenableLeases(
		func(t *testing.T) string { return filepath.Join(t.TempDir(), "sync.db") },
		func(t *testing.T, path string, now func() int64) ports.LeaseStore {
			st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return openSQLLeases(t, st.DB(), st.ReadDB(), now)
		}))
}

func TestLeasesPostgres(t *testing.T) {
	contract.RunLeases(t, reopenableLeases(
		func(t *testing.T) string { return pgtest.DSN(t) },
		func(t *testing.T, dsn string, now func() int64) ports.LeaseStore {
			st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return openSQLLeases(t, st.DB(), st.ReadDB(), now)
		}))
}

// reopenableLeases is a harness whose stores open at a location fresh
// makes, and reopen at the location of the store they stand in for.
func reopenableLeases(fresh func(t *testing.T) string, open func(t *testing.T, loc string, now func() int64) ports.LeaseStore) contract.LeaseHarness {
	locs := map[ports.LeaseStore]string{}
	openAt := func(t *testing.T, loc string, now func() int64) ports.LeaseStore {
		s := open(t, loc, now)
		locs[s] = loc
		return s
	}
	return contract.LeaseHarness{
		New:        func(t *testing.T) ports.LeaseStore { return openAt(t, fresh(t), nil) },
		Reopen:     func(t *testing.T, s ports.LeaseStore) ports.LeaseStore { return openAt(t, locs[s], nil) },
		NewClocked: func(t *testing.T, now func() int64) ports.LeaseStore { return openAt(t, fresh(t), now) },
	}
}

// openSQLLeases opens the database lease store over db and readDB.
func openSQLLeases(t *testing.T, db, readDB *bun.DB, now func() int64) ports.LeaseStore {
	s, err := sqllease.Open(context.Background(), sqllease.Options{DB: db, ReadDB: readDB, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

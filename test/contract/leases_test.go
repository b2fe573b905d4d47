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
		New: func(*testing.T) ports.LeaseStore { return memlease.New() },
	})
}

func TestLeasesSQLite(t *testing.T) {
	contract.RunLeases(t, reopenableLeases(
		func(t *testing.T) string { return filepath.Join(t.TempDir(), "sync.db") },
		func(t *testing.T, path string) ports.LeaseStore {
			st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return openSQLLeases(t, st.DB(), st.ReadDB())
		}))
}

func TestLeasesPostgres(t *testing.T) {
	contract.RunLeases(t, reopenableLeases(
		func(t *testing.T) string { return pgtest.DSN(t) },
		func(t *testing.T, dsn string) ports.LeaseStore {
			st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return openSQLLeases(t, st.DB(), st.ReadDB())
		}))
}

// reopenableLeases is a harness whose stores open at a location fresh
// makes, and reopen at the location of the store they stand in for.
func reopenableLeases(fresh func(t *testing.T) string, open func(t *testing.T, loc string) ports.LeaseStore) contract.LeaseHarness {
	locs := map[ports.LeaseStore]string{}
	openAt := func(t *testing.T, loc string) ports.LeaseStore {
		s := open(t, loc)
		locs[s] = loc
		return s
	}
	return contract.LeaseHarness{
		New:    func(t *testing.T) ports.LeaseStore { return openAt(t, fresh(t)) },
		Reopen: func(t *testing.T, s ports.LeaseStore) ports.LeaseStore { return openAt(t, locs[s]) },
	}
}

// openSQLLeases opens the database lease store over db and readDB.
func openSQLLeases(t *testing.T, db, readDB *bun.DB) ports.LeaseStore {
	s, err := sqllease.Open(context.Background(), sqllease.Options{DB: db, ReadDB: readDB})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

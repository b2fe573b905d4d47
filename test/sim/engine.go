package sim

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the schema of a run

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/ports"
)

// Engine opens one run's storage: a fresh database, and the same database
// again after a simulated crash.
type Engine interface {
	Name() string
	// Open opens a fresh, empty database for one run.
	Open(ctx context.Context, o EngineOptions) (ports.Storage, error)
	// Reopen opens the database Open created again, as a restarted
	// process would (the caller closed the previous handle).
	Reopen(ctx context.Context) (ports.Storage, error)
	// Cleanup closes what the run left open and removes its database.
	Cleanup() error
}

// EngineOptions are what every store of a run shares.
type EngineOptions struct {
	// Now is the run's virtual clock.
	Now func() time.Time
	// NewEpoch mints log epochs (engines that take a minter).
	NewEpoch func() string
}

// EngineNames are the engines a run may name.
var EngineNames = []string{"memory", "sqlite", "postgres"}

// NewEngine returns the engine called name: memory (the in-memory store),
// sqlite (a file under dir) or postgres (a schema of its own on the
// database pgURL names, dropped at cleanup).
func NewEngine(name, dir, pgURL string) (Engine, error) {
	switch name {
	case "memory":
		return &memoryEngine{}, nil
	case "sqlite":
		return &sqliteEngine{dir: dir}, nil
	case "postgres":
		if pgURL == "" {
			return nil, errors.New("sim: the postgres engine needs a database URL (SYNCD_TEST_POSTGRES_URL)")
		}
		return &postgresEngine{base: pgURL}, nil
	}
	return nil, fmt.Errorf("sim: unknown engine %q (want memory, sqlite or postgres)", name)
}

type memoryEngine struct {
	st *memory.Store
}

func (e *memoryEngine) Name() string { return "memory" }

func (e *memoryEngine) Open(_ context.Context, o EngineOptions) (ports.Storage, error) {
	e.st = memory.NewWithOptions(memory.Options{Now: o.Now})
	return e.st, nil
}

// Reopen hands out another handle on the same in-memory database: what
// survives a crash is what the store holds, the server's caches do not.
func (e *memoryEngine) Reopen(context.Context) (ports.Storage, error) { return e.st.Reopen(), nil }

func (e *memoryEngine) Cleanup() error { return nil }

type sqliteEngine struct {
	dir  string
	path string
	o    EngineOptions
	tmp  string
}

func (e *sqliteEngine) Name() string { return "sqlite" }

func (e *sqliteEngine) Open(ctx context.Context, o EngineOptions) (ports.Storage, error) {
	dir, err := os.MkdirTemp(e.dir, "syncsim-*")
	if err != nil {
		return nil, err
	}
	e.tmp, e.path, e.o = dir, filepath.Join(dir, "sim.db"), o
	return e.Reopen(ctx)
}

func (e *sqliteEngine) Reopen(ctx context.Context) (ports.Storage, error) {
	return sqlite.Open(ctx, sqlite.Options{Path: e.path, Synchronous: "NORMAL", NewEpoch: e.o.NewEpoch, Now: e.o.Now,
		RecentLogBytes: 1 << 20})
}

func (e *sqliteEngine) Cleanup() error {
	if e.tmp == "" {
		return nil
	}
	return os.RemoveAll(e.tmp)
}

type postgresEngine struct {
	base   string
	schema string
	dsn    string
	o      EngineOptions
}

func (e *postgresEngine) Name() string { return "postgres" }

func (e *postgresEngine) Open(ctx context.Context, o EngineOptions) (ports.Storage, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	e.schema, e.o = "syncd_sim_"+hex.EncodeToString(b), o
	if err := pgExec(ctx, e.base, `CREATE SCHEMA "`+e.schema+`"`); err != nil {
		return nil, fmt.Errorf("sim: create schema: %w", err)
	}
	u, err := url.Parse(e.base)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("search_path", e.schema)
	u.RawQuery = q.Encode()
	e.dsn = u.String()
	return e.Reopen(ctx)
}

func (e *postgresEngine) Reopen(ctx context.Context) (ports.Storage, error) {
	return postgres.Open(ctx, postgres.Options{DSN: e.dsn, MaxConns: 4, NewEpoch: e.o.NewEpoch, Now: e.o.Now, RecentLogBytes: 1 << 20})
}

func (e *postgresEngine) Cleanup() error {
	if e.schema == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pgExec(ctx, e.base, `DROP SCHEMA IF EXISTS "`+e.schema+`" CASCADE`)
}

func pgExec(ctx context.Context, dsn, stmt string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

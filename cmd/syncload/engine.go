package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL driver syncd uses
	_ "modernc.org/sqlite"             // the SQLite driver syncd uses

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
)

// engineDB is the database engine-commit drives directly: the storage
// engine's own commit limit, the denominator of the push-pull figures.
type engineDB struct {
	db    *sql.DB
	table string
	next  atomic.Int64
	pg    bool
}

// engineCommit measures single-row committing transactions straight on
// --engine-database with the drivers and durability settings syncd uses
// (SQLite: WAL, synchronous FULL, BEGIN IMMEDIATE; PostgreSQL: pgx, the
// server's own fsync and synchronous_commit), one connection per client.
func engineCommit() *scenario {
	return &scenario{
		name: "engine-commit",
		about: "no SSP2 server: each client runs BEGIN, one single-row INSERT, COMMIT on --engine-database (a SQLite " +
			"file path or a postgres:// URL) on its own connection, with syncd's drivers and durability settings; " +
			"with --engine-read each commit is followed by a one-row SELECT (what one push-pull round costs the engine at least)",
		kinds: []string{"commit", "read"},
		prepare: func(ctx context.Context, e *env) error {
			en, err := openEngine(ctx, e.o.engineDatabase, e.o.vus, e.runID)
			if err != nil {
				return err
			}
			e.engine = en
			e.note("engine", map[bool]string{true: "postgres", false: "sqlite"}[en.pg])
			return nil
		},
		step: func(ctx context.Context, e *env, _ *vu) error {
			en := e.engine
			id := en.next.Add(1)
			if err := e.timed(ctx, "commit", func() (int, int, error) {
				return 0, 1, en.commit(ctx, id)
			}); err != nil {
				return err
			}
			if !e.o.engineRead {
				return nil
			}
			return e.timed(ctx, "read", func() (int, int, error) {
				v, err := en.read(ctx, id)
				if err == nil && v != id {
					err = fmt.Errorf("read back %d, wrote %d", v, id)
				}
				return 0, 1, err
			})
		},
		finish: func(ctx context.Context, e *env, _ []*vu) error {
			if e.engine == nil {
				return nil
			}
			_, err := e.engine.db.ExecContext(ctx, "DROP TABLE "+e.engine.table)
			return errors.Join(err, e.engine.db.Close())
		},
	}
}

func openEngine(ctx context.Context, dsn string, conns int, runID string) (*engineDB, error) {
	if dsn == "" {
		return nil, errors.New("engine-commit needs --engine-database (a SQLite file path or a postgres:// URL)")
	}
	en := &engineDB{table: "syncload_engine_" + strings.ReplaceAll(runID, "-", "_")}
	var err error
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		en.pg = true
		en.db, err = sql.Open("pgx", dsn)
	} else {
		en.db, err = sql.Open("sqlite", sqlite.DSN(sqlite.Options{Path: dsn}, true))
	}
	if err != nil {
		return nil, err
	}
	en.db.SetMaxOpenConns(conns)
	en.db.SetMaxIdleConns(conns)
	if _, err := en.db.ExecContext(ctx, "CREATE TABLE "+en.table+"(id BIGINT PRIMARY KEY, v BIGINT NOT NULL, payload TEXT NOT NULL)"); err != nil {
		_ = en.db.Close()
		return nil, fmt.Errorf("create the engine table: %w", err)
	}
	return en, nil
}

// q renders ? placeholders for the engine.
func (en *engineDB) q(s string) string {
	if !en.pg {
		return s
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

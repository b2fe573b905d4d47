package testcontrol

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
)

// SchemaPrefix starts the name of every PostgreSQL schema the plane
// creates: SchemaPrefix, the plane's owner id, "_", the instance id
// (its capture adds "_b"). A plane that starts drops the schemas of
// planes that are gone (see postgres.SchemaSet).
const SchemaPrefix = "syncd_tc_"

// Connection bounds on PostgreSQL.
const (
	// DefaultDatabaseMaxConns is the plane's default connection budget.
	DefaultDatabaseMaxConns = 64
	// InstanceConns is the most connections one instance's store holds:
	// enough for a harness's concurrent requests to one instance, and two
	// for the schema lock beside a transaction while it is laid out.
	InstanceConns = 4
	// MinDatabaseMaxConns is the smallest budget: the plane's own
	// connections and one instance's.
	MinDatabaseMaxConns = postgres.SchemaSetConns + InstanceConns
)

// postgresEngine keeps each instance in a PostgreSQL schema of its own on
// one database, over a store with a search_path of that schema.
type postgresEngine struct {
	set      *postgres.SchemaSet
	maxConns int
}

// openPostgres connects the plane to its database, drops the schemas of
// planes that are gone and warns when the server cannot take the budget.
func openPostgres(ctx context.Context, dsn string, maxConns int, log *zap.Logger) (*postgresEngine, error) {
	set, dropped, err := postgres.OpenSchemaSet(ctx, postgres.SchemaSetOptions{DSN: dsn, Prefix: SchemaPrefix})
	if err != nil {
		return nil, err
	}
	if len(dropped) > 0 {
		log.Info("dropped the schemas of test-control planes that are gone", zap.Strings("schemas", dropped))
	}
	if free, err := set.FreeConns(ctx); err == nil && free+postgres.SchemaSetConns < maxConns {
		log.Warn("the PostgreSQL server has fewer free connections than --test-control-database-max-conns: creates may fail to connect",
			zap.Int("free", free), zap.Int("budget", maxConns))
	}
	log.Info("test instances live in PostgreSQL schemas", zap.String("prefix", set.Schema("")),
		zap.Int("max_instances", (maxConns-postgres.SchemaSetConns)/InstanceConns))
	return &postgresEngine{set: set, maxConns: maxConns}, nil
}

func (e *postgresEngine) maxInstances() int {
	return (e.maxConns - postgres.SchemaSetConns) / InstanceConns
}

func (e *postgresEngine) close(ctx context.Context) error { return e.set.Close(ctx) }

func (e *postgresEngine) newDB(ctx context.Context, id, _ string, capBytes int64) (database, error) {
	name := strings.ToLower(id)
	if err := e.set.Create(ctx, name); err != nil {
		return nil, err
	}
	return &postgresDB{set: e.set, name: name, backup: name + "_b", capBytes: capBytes}, nil
}

// postgresDB is an instance's schema. PostgreSQL has no size cap for a
// schema, so the plane keeps one: a push is refused once the schema's
// tables have grown capBytes past its empty layout, so a schema holds at
// most its cap and one push.
type postgresDB struct {
	set          *postgres.SchemaSet
	name, backup string
	capBytes     int64
	mu           sync.Mutex
	baseline     int64 // the empty layout's bytes
}

func (d *postgresDB) openOn(ctx context.Context, name string, o storeOptions) (*sqlstore.Store, error) {
	dsn, err := d.set.DSN(name)
	if err != nil {
		return nil, err
	}
	st, err := postgres.Open(ctx, postgres.Options{
		DSN: dsn, MaxConns: InstanceConns, NewEpoch: o.newEpoch, Now: o.now,
		// As on SQLite: the server's touch interval and head reuse, one
		// push per transaction.
		TouchInterval: sqlstore.DefaultTouchInterval,
		PushGroup:     1,
	})
	if err != nil {
		return nil, err
	}
	return st.Store, nil
}

func (d *postgresDB) open(ctx context.Context, o storeOptions) (*sqlstore.Store, error) {
	return d.openOn(ctx, d.name, o)
}

func (d *postgresDB) ready(ctx context.Context) error {
	n, err := d.set.Size(ctx, d.name)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.baseline = n
	d.mu.Unlock()
	return nil
}

func (d *postgresDB) room(ctx context.Context) error {
	n, err := d.set.Size(ctx, d.name)
	if err != nil {
		return err
	}
	d.mu.Lock()
	used := n - d.baseline
	d.mu.Unlock()
	if used >= d.capBytes {
		return fmt.Errorf("%w (schema %s: %d bytes past its empty layout)", errStoreFull("database", d.capBytes), d.set.Schema(d.name), used)
	}
	return nil
}

func (d *postgresDB) full(error) bool { return false }

// layoutOn (re)creates schema name with the instance's empty layout.
func (d *postgresDB) layoutOn(ctx context.Context, name string, o storeOptions, layout layoutFunc) error {
	if err := d.set.Drop(ctx, name); err != nil {
		return err
	}
	if err := d.set.Create(ctx, name); err != nil {
		return err
	}
	st, err := d.openOn(ctx, name, o)
	if err != nil {
		return err
	}
	return errors.Join(layout(ctx, st), st.Close())
}

// capture copies the live schema into the capture schema, one snapshot
// of it, laid out by the store as the live one was.
func (d *postgresDB) capture(ctx context.Context, _ *sqlstore.Store, o storeOptions, layout layoutFunc) error {
	if err := d.layoutOn(ctx, d.backup, o, layout); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if err := d.set.CopyData(ctx, d.name, d.backup); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// restore lays the live schema out anew and copies the capture into it.
func (d *postgresDB) restore(ctx context.Context, o storeOptions, layout layoutFunc) error {
	if err := d.layoutOn(ctx, d.name, o, layout); err != nil {
		return err
	}
	return d.set.CopyData(ctx, d.backup, d.name)
}

func (d *postgresDB) drop(ctx context.Context) error {
	return errors.Join(d.set.Drop(ctx, d.name), d.set.Drop(ctx, d.backup))
}

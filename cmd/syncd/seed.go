package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/seed"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

const seedUsage = `Usage:
  syncd seed [flags]

Fills one scope value of a table with synthetic rows, written as ordinary
server commits (actor and client "syncd-seed", one commit per --batch rows),
for load tests: by default the "storm" value of the schema's first table
scoped by a string column (the demo's lists; the tasks fixture's tasks,
which syncload bootstrap-storm reads).

  syncd seed --schema ../shared/fixtures/tasks.ir.json --database ./load.db --rows 100000
  syncd seed --schema tasks.ir.json --database postgres://127.0.0.1/load --rows 20000 --value storm20k

The database is prepared for the schema first (as "syncd serve" does).
--database and --schema default to SYNCD_DATABASE and SYNCD_SCHEMA.

Flags:
`

// runSeed implements "syncd seed".
func runSeed(args, environ []string, stdout, stderr io.Writer) int {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	cfg := config.Default()
	if v := env[config.EnvPrefix+"DATABASE"]; v != "" {
		cfg.Database = v
	}
	cfg.Schema = env[config.EnvPrefix+"SCHEMA"]
	fs := flag.NewFlagSet("syncd seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Database, "database", cfg.Database, "SQLite file path, sqlite:PATH, or postgres:// URL")
	fs.StringVar(&cfg.Schema, "schema", cfg.Schema, "schema IR file (empty: the embedded demo schema)")
	table := fs.String("table", "", "table to fill (default: the schema's first table scoped by a string column; the demo's lists)")
	value := fs.String("value", "storm", "value of the table's first scope variable (the project)")
	partition := fs.String("partition", "default", "partition holding the rows")
	rows := fs.Int("rows", 100_000, "rows to write")
	batch := fs.Int("batch", seed.DefaultBatch, "rows per commit")
	portable := fs.Bool("portable", false, "write row by row through the push transaction instead of the engine's bulk path")
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), seedUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(stderr, "syncd seed: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	src := platform.NewSchemaSource(cfg)
	data, err := src.Read()
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd seed: schema %s: %v\n", src.Name, err)
		return 2
	}
	sch, err := schema.Load(data)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd seed: schema %s: %v\n", src.Name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	clk := platform.NewClock()
	st, err := wiring.OpenStorage(ctx, cfg, clk)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd seed: %v\n", err)
		return 1
	}
	defer func() { _ = st.Close() }()
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd seed: prepare the database: %v\n", err)
		return 1
	}
	if *table == "" {
		*table = seed.DefaultTable(sch)
	}
	o := seed.Options{Schema: sch, Table: *table, Value: *value, Partition: *partition, Rows: *rows, Batch: *batch, Now: clk.Now}
	if !*portable {
		o.Bulk = bulkWriter(st)
	}
	res, err := seed.Run(ctx, st, o)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd seed: %v\n", err)
		return 1
	}
	secs := res.Elapsed.Seconds()
	_, _ = fmt.Fprintf(stdout, "seeded %d rows of %s (%s) in partition %q: %d commits, seq %d..%d, %s (%.0f rows/s)\n",
		res.Rows, *table, *value, res.Partition, res.Commits, res.FirstSeq, res.LastSeq,
		res.Elapsed.Round(time.Millisecond), float64(res.Rows)/max(secs, 1e-9))
	return 0
}

// sqlSeeder is the bulk path of the SQL engines (sqlstore.Store.SeedRows).
type sqlSeeder interface {
	SeedRows(ctx context.Context, partition, table string, rows []ports.RowWrite, o sqlstore.SeedOptions) (int64, error)
}

// bulkWriter adapts an engine's bulk path, or returns nil without one.
func bulkWriter(st ports.Storage) seed.BulkWriter {
	s, ok := st.(sqlSeeder)
	if !ok {
		return nil
	}
	return func(ctx context.Context, partition, table string, rows []ports.RowWrite, b seed.Batch) (int64, error) {
		return s.SeedRows(ctx, partition, table, rows, sqlstore.SeedOptions{
			WriterVersion: b.WriterVersion, Batch: len(rows), CreatedAtMs: b.CreatedAtMs,
			ActorID: b.ActorID, ClientID: b.ClientID, ClientCommitPrefix: b.ClientCommitID + "-",
		})
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/checkpoint"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/app/wiring"
	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

const checkpointUsage = `Usage: syncd checkpoint list|declare|run|activate [flags]

Drives the backfill checkpoints of the schema version --schema names
(the 0.24 safe-upgrade rules). Every subcommand takes the server's flags,
file and environment (--database and --schema matter here) and these:

  --partition P     the checkpoint's partition (list: only this one)
  --name N          the checkpoint's name
  --table T         run: the table the built-in fill backfills;
                    activate: a source table (repeat or comma-separate)
  --set COL=JSON    run: fill COL with the JSON value where it is NULL
                    (repeatable), e.g. --set priority=0 --set tag='"none"'
  --batch-rows N    run: rows per batch (default 500)

  list      the checkpoints with state, watermark, observed rows and owner
            epoch
  declare   declare the checkpoint at the schema version (raises the
            partition's writer fence); at a version bump this migrates the
            database and installs the declaration in the same transaction
  run       claim the checkpoint and run the built-in fill backfill: rows
            of --table whose --set columns are NULL get the given values,
            written as server commits that clients pull; resumable, and a
            second run elsewhere takes over (the first stops); it catches
            up and activates. Without --table and --set it refuses
            (sync.backfill.unregistered): other backfills need host code
            (app/checkpoint).
  activate  activate a checkpoint whose backfill completed its full pass

Processes that serve while a checkpoint backfills must declare it
(--checkpoints P/N); the others wait in readiness phase
backfill_checkpoint and turn ready by themselves once it activates.
`

// checkpointFlags are the subcommand's own flags; the rest are the
// server's.
type checkpointFlags struct {
	partition, name string
	tables          []string
	set             map[string]string
	batchRows       int
}

// splitCheckpointArgs takes the subcommand's flags out of args.
func splitCheckpointArgs(args []string) (checkpointFlags, []string, error) {
	f := checkpointFlags{set: map[string]string{}}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		switch name {
		case "partition", "name", "table", "set", "batch-rows":
		default:
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return f, nil, fmt.Errorf("flag --%s needs a value", name)
			}
			i++
			val = args[i]
		}
		switch name {
		case "partition":
			f.partition = val
		case "name":
			f.name = val
		case "table":
			for _, t := range strings.Split(val, ",") {
				if t = strings.TrimSpace(t); t != "" {
					f.tables = append(f.tables, t)
				}
			}
		case "set":
			col, v, ok := strings.Cut(val, "=")
			if !ok || col == "" {
				return f, nil, fmt.Errorf("--set %q: want COLUMN=JSON", val)
			}
			f.set[col] = v
		case "batch-rows":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return f, nil, fmt.Errorf("--batch-rows %q: want a positive number", val)
			}
			f.batchRows = n
		}
	}
	return f, rest, nil
}

// runCheckpoint implements "syncd checkpoint".
func runCheckpoint(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		_, _ = fmt.Fprint(w, checkpointUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	switch sub {
	case "list", "declare", "run", "activate":
	default:
		_, _ = fmt.Fprintf(stderr, "syncd checkpoint: unknown subcommand %q (list, declare, run, activate)\n", sub)
		return 2
	}
	prefix := "syncd checkpoint " + sub
	flags, rest, err := splitCheckpointArgs(args[1:])
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return 2
	}
	// Checkpoint work authenticates nobody: --auth only matters to serve.
	environ = append([]string{config.EnvName("auth") + "=" + config.AuthDev}, environ...)
	res, err := config.LoadFor(checkpointUsage, rest, environ, stdout)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return 2
	}
	if sub != "list" && (flags.partition == "" || flags.name == "") {
		_, _ = fmt.Fprintf(stderr, "%s: --partition and --name are required\n", prefix)
		return 2
	}
	cfg := res.Config
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fail := func(err error) int {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return 1
	}
	if kind, path, err := config.ParseDatabase(cfg.Database); err == nil && kind == config.SQLite && sub != "declare" {
		if _, err := os.Stat(path); err != nil {
			return fail(fmt.Errorf("database: %w", err))
		}
	}
	src := platform.NewSchemaSource(cfg)
	ir, err := src.Read()
	if err != nil {
		return fail(fmt.Errorf("schema %s: %w", src.Name, err))
	}
	sch, err := schema.Load(ir)
	if err != nil {
		return fail(fmt.Errorf("schema %s: %w", src.Name, err))
	}
	clk := platform.NewClock()
	st, err := wiring.OpenStorage(ctx, cfg, clk)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = st.Close() }()
	// Only declare and run write under the schema (declare may be the
	// bump itself); list and activate read and change checkpoint rows.
	if sub == "declare" || sub == "run" {
		if err := ensureFor(ctx, st, sch, flags); err != nil {
			return fail(err)
		}
	}
	bs, ok := st.(checkpoint.Store)
	if !ok {
		return fail(errors.New("the storage engine has no table scanner"))
	}
	svc, err := push.New(push.Options{Schema: func() *schema.Schema { return sch }, Store: st,
		Mergers: wiring.BuiltinMergers(), Limits: cfg.Limits.Domain(), Now: clk.Now})
	if err != nil {
		return fail(err)
	}
	pr := newProgressPrinter(stdout)
	r, err := checkpoint.New(checkpoint.Options{Store: bs, Commits: svc, Schema: sch, Clock: clk, Log: zap.NewNop(),
		BatchRows: flags.batchRows, OnProgress: pr.print})
	if err != nil {
		return fail(err)
	}
	switch sub {
	case "list":
		return listCheckpoints(ctx, st, r, flags.partition, stdout, fail)
	case "declare":
		cp, err := r.Declare(ctx, flags.partition, flags.name)
		if err != nil {
			return fail(err)
		}
		_, _ = fmt.Fprintf(stdout, "checkpoint %s/%s: %s at schema version %d\n", cp.Partition, cp.Name, cp.State, cp.SchemaVersion)
		return 0
	case "activate":
		act, err := r.Activate(ctx, flags.partition, flags.name, flags.tables)
		if err != nil {
			return fail(err)
		}
		_, _ = fmt.Fprintf(stdout, "checkpoint %s/%s: %s\n", flags.partition, flags.name, act)
		switch act {
		case cpdomain.Activated:
			return 0
		case cpdomain.Stale:
			_, _ = fmt.Fprintln(stderr, prefix+": sources changed since the watermark: run the backfill again to catch up")
		case cpdomain.Unverifiable:
			_, _ = fmt.Fprintln(stderr, prefix+": the log was pruned past the watermark: run the backfill again (its pass restarts)")
		}
		return 1
	}
	// run
	var bf ports.Backfiller
	if len(flags.tables) > 0 || len(flags.set) > 0 {
		if len(flags.tables) != 1 {
			return fail(syncerr.Newf(syncerr.BackfillInvalidSpec, "run fills exactly one --table"))
		}
		fill, err := checkpoint.NewFill(sch, flags.tables[0], flags.set)
		if err != nil {
			return fail(err)
		}
		bf = fill
	}
	if bf == nil {
		return fail(syncerr.Newf(syncerr.BackfillUnregistered,
			"no backfill for checkpoint %s/%s: the stock binary has the built-in fill (--table T --set COLUMN=JSON); other backfills run from host code (app/checkpoint)",
			flags.partition, flags.name))
	}
	result, err := r.Run(ctx, flags.partition, flags.name, bf)
	pr.finish()
	if err != nil {
		return fail(err)
	}
	_, _ = fmt.Fprintf(stdout, "checkpoint %s/%s: %s (batches %d, rows written %d, activations %d)\n",
		flags.partition, flags.name, result.Outcome, result.Batches, result.RowsWritten, result.Activations)
	if result.Outcome == checkpoint.OutcomeSuperseded {
		_, _ = fmt.Fprintln(stderr, prefix+": another runner claimed the checkpoint; it carries on from the stored cursor")
		return 3
	}
	return 0
}

// ensureFor ensures sch with the named checkpoint declared, and every
// checkpoint already pending at its version: this process serves no
// client, so it may run beside any of them.
func ensureFor(ctx context.Context, st ports.Storage, sch *schema.Schema, f checkpointFlags) error {
	var decls []cpdomain.Declaration
	if f.partition != "" && f.name != "" {
		decls = append(decls, cpdomain.Declaration{Partition: f.partition, Name: f.name, SchemaVersion: sch.Version})
	}
	if g, err := st.ReadServeGate(ctx, "", sch.Version); err == nil {
		for _, p := range g.Pending {
			decls = append(decls, cpdomain.Declaration{Partition: p.Partition, Name: p.Name, SchemaVersion: sch.Version})
		}
	}
	return st.EnsureSchema(ctx, sch, decls)
}

func listCheckpoints(ctx context.Context, st ports.Storage, r *checkpoint.Runner, partition string, stdout io.Writer, fail func(error) int) int {
	parts := []string{partition}
	if partition == "" {
		// The registered partitions, and those with a pending checkpoint
		// at the running version (registered or not).
		infos, err := st.ListPartitions(ctx)
		if err != nil {
			return fail(err)
		}
		parts = parts[:0]
		seen := map[string]bool{}
		for _, p := range infos {
			parts, seen[p.Partition] = append(parts, p.Partition), true
		}
		if g, err := st.ReadServeGate(ctx, "", r.SchemaVersion()); err == nil {
			for _, p := range g.Pending {
				if !seen[p.Partition] {
					parts, seen[p.Partition] = append(parts, p.Partition), true
				}
			}
		}
	}
	var all []cpdomain.Checkpoint
	for _, p := range parts {
		cps, err := r.List(ctx, p)
		if err != nil {
			return fail(err)
		}
		all = append(all, cps...)
	}
	if len(all) == 0 {
		_, _ = fmt.Fprintln(stdout, "no checkpoints")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "PARTITION\tNAME\tVERSION\tSTATE\tWATERMARK\tOBSERVED\tEPOCH\tPASS\tUPDATED")
	for _, cp := range all {
		pass := "pending"
		switch {
		case checkpoint.PassComplete(cp):
			pass = "complete"
		case strings.HasPrefix(cp.Cursor, "scan:"):
			pass = "running"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", cp.Partition, cp.Name, cp.SchemaVersion, cp.State,
			cp.Watermark, cp.ObservedRows, cp.OwnerEpoch, pass, time.UnixMilli(cp.UpdatedAtMs).UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
	return 0
}

// progressPrinter shows a run's progress: one redrawn line with a bar
// on a terminal, plain lines otherwise (logs, pipes, CI).
type progressPrinter struct {
	w     io.Writer
	tty   bool
	drawn bool
	spin  int
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressPrinter{w: w, tty: tty}
}

// barWidth is the terminal bar's width in cells.
const barWidth = 24

func (p *progressPrinter) print(pr checkpoint.Progress) {
	line := fmt.Sprintf("%s/%s %s: epoch %d, watermark %d, observed %d rows, %d batches, %d rows written",
		pr.Partition, pr.Name, pr.Phase, pr.OwnerEpoch, pr.Watermark, pr.ObservedRows, pr.Batches, pr.RowsWritten)
	if pr.Activation != "" {
		line += ", activation " + string(pr.Activation)
	}
	if !p.tty {
		_, _ = fmt.Fprintln(p.w, line)
		return
	}
	// The pass's size is unknown up front (the cursor is a row key), so
	// the bar runs back and forth while batches commit and fills when the
	// checkpoint activates.
	bar := make([]byte, barWidth)
	for i := range bar {
		bar[i] = '.'
	}
	if pr.Phase == checkpoint.PhaseActivated {
		for i := range bar {
			bar[i] = '#'
		}
	} else {
		p.spin++
		pos := p.spin % (2 * (barWidth - 4))
		if pos >= barWidth-4 {
			pos = 2*(barWidth-4) - pos
		}
		copy(bar[pos:], "####")
	}
	_, _ = fmt.Fprintf(p.w, "\r\x1b[2K[%s] %s", bar, line)
	p.drawn = true
}

// finish ends the redrawn line.
func (p *progressPrinter) finish() {
	if p.tty && p.drawn {
		_, _ = fmt.Fprintln(p.w)
	}
}

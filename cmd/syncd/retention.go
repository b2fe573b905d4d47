package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/retention"
	"github.com/syncd-dev/syncd/app/wiring"
)

const pruneUsage = `Usage: syncd prune [flags]

Runs one retention pass (SPEC 4.6) over every registered partition of
--database and prints what it removed. It takes the server's flags, file
and environment (--database and the --retention-* floors matter here), so
the same settings prune as the running server would; it never creates a
database.

With --prune-to-active-floors-UNSAFE-for-tests (tests and load runs only)
it prunes down to the cursor floor of the clients seen within
--retention-active-window, keeping no newest commits: run it beside a
loopback test server to race pruning against traffic.
`

// runPrune implements "syncd prune": one retention pass (SPEC §4.6) over
// every registered partition of the configured database, with the same
// flags, file and environment as "syncd serve" (--database and the
// --retention-* floors matter here), then a summary per partition.
func runPrune(args, environ []string, stdout, stderr io.Writer) int {
	// Pruning authenticates nobody: --auth only matters to serve.
	environ = append([]string{config.EnvName("auth") + "=" + config.AuthDev}, environ...)
	res, err := config.LoadFor(pruneUsage, args, environ, stdout)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd prune: %v\n", err)
		return 2
	}
	cfg := res.Config
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Never create a SQLite file just to prune it.
	if kind, path, err := config.ParseDatabase(cfg.Database); err == nil && kind == config.SQLite {
		if _, err := os.Stat(path); err != nil {
			_, _ = fmt.Fprintf(stderr, "syncd prune: database: %v\n", err)
			return 1
		}
	}
	clk := platform.NewClock()
	st, err := wiring.OpenStorage(ctx, cfg, clk)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd prune: %v\n", err)
		return 1
	}
	defer func() { _ = st.Close() }()
	if cfg.Retention.ToActiveFloorsUnsafe {
		_, _ = fmt.Fprintf(stderr, "syncd prune: UNSAFE: --%s prunes down to the active clients' cursor floor (active window %s), below the SPEC 4.6 minimums\n",
			config.FlagToActiveFloors, cfg.Retention.ActiveWindow)
	}
	p, err := retention.New(retention.Options{Store: st, Policy: wiring.RetentionPolicy(cfg), Unfloored: cfg.Retention.ToActiveFloorsUnsafe, Now: clk.Now})
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd prune: %v\n", err)
		return 1
	}
	results, err := p.PruneAll(ctx)
	var removed int64
	for _, r := range results {
		removed += r.RemovedCommits
		_, _ = fmt.Fprintf(stdout, "partition %q: horizon %d -> %d, removed %d commits\n",
			r.Partition, r.PreviousHorizonSeq, r.HorizonSeq, r.RemovedCommits)
	}
	_, _ = fmt.Fprintf(stdout, "pruned %d partitions, removed %d commits\n", len(results), removed)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd prune: %v\n", err)
		return 1
	}
	return 0
}

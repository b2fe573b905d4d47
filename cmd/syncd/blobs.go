package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/blobs"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
)

const blobsSweepUsage = `Usage: syncd blobs sweep [flags]

Deletes the orphan blobs of every registered partition of --database once
(SPEC 5.9.2): blobs no row references, uploaded longer than
--blob-orphan-grace ago. It takes the server's flags, file and environment
(--database, --blob-store and its settings, --blob-orphan-grace matter
here), and it is safe beside a running server: a push referencing a blob
either keeps it or is refused blob.not_found, never left with a deleted
blob. It never creates a database.
`

// runBlobs implements "syncd blobs sweep".
func runBlobs(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "sweep" {
		_, _ = fmt.Fprintln(stderr, "Usage: syncd blobs sweep [flags] (see syncd blobs sweep --help)")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return 0
		}
		return 2
	}
	// Sweeping authenticates nobody: --auth only matters to serve.
	environ = append([]string{config.EnvName("auth") + "=" + config.AuthDev}, environ...)
	res, err := config.LoadFor(blobsSweepUsage, args[1:], environ, stdout)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd blobs sweep: %v\n", err)
		return 2
	}
	cfg := res.Config
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fail := func(err error) int {
		_, _ = fmt.Fprintf(stderr, "syncd blobs sweep: %v\n", err)
		return 1
	}
	if kind, path, err := config.ParseDatabase(cfg.Database); err == nil && kind == config.SQLite {
		if _, err := os.Stat(path); err != nil {
			return fail(fmt.Errorf("database: %w", err))
		}
	}
	clk := platform.NewClock()
	st, err := wiring.OpenStorage(ctx, cfg, clk)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = st.Close() }()
	store, err := wiring.OpenBlobStore(ctx, cfg, st, clk, zap.NewNop())
	if err != nil {
		return fail(err)
	}
	if store == nil {
		return fail(errors.New("--blob-store none: there are no blobs to sweep"))
	}
	gc, err := blobs.NewGC(blobs.GCOptions{Blobs: store, Storage: st, OrphanGrace: cfg.Blobs.OrphanGrace, Now: clk.Now})
	if err != nil {
		return fail(err)
	}
	results, err := gc.CollectAll(ctx)
	deleted := 0
	for _, r := range results {
		deleted += r.Deleted
		_, _ = fmt.Fprintf(stdout, "partition %q: deleted %d of %d orphan blobs\n", r.Partition, r.Deleted, r.Claimed)
	}
	_, _ = fmt.Fprintf(stdout, "swept %d partitions, deleted %d orphan blobs\n", len(results), deleted)
	if err != nil {
		return fail(err)
	}
	return 0
}

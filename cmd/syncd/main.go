// Command syncd is the SSP2 sync server.
//
//	syncd serve [flags]     run the server (see syncd serve --help)
//	syncd version           print version and build information
//	syncd inspect ARGS...   decode and render SSP2 messages
//	syncd prune [flags]     prune the commit log of every partition once
//	syncd blobs sweep       delete the orphan blobs of every partition once
//	syncd reactions ...     list durable reactions; retry dead letters; prune
//	syncd seed [flags]      fill a project with synthetic rows for load tests
//	syncd health [flags]    exit 0 when a server's /readyz answers 200
//	syncd backup [flags]    copy a SQLite database consistently, online
//	syncd epoch rotate ...  new log epochs after a restore (SPEC §2.1)
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
)

// Set at link time by `make build|static|release` (-ldflags "-X
// main.version=v1.2.3 -X main.revision=..."); a plain `go build` leaves them
// empty and platform.ReadStampedBuildInfo falls back to Go's VCS stamp.
var (
	version      = "dev"
	revision     string
	revisionTime string
	// treeModified is "true" when the tree had uncommitted changes.
	treeModified string
)

func stamp() platform.Stamp {
	return platform.Stamp{Version: version, Commit: revision, CommitAt: revisionTime, Modified: treeModified}
}

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}

func run(args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], environ, stdout, stderr)
	case "version", "--version", "-version":
		_, _ = fmt.Fprint(stdout, platform.ReadStampedBuildInfo(stamp()).String())
		return 0
	case "inspect":
		return runInspect(args[1:], stdin, stdout, stderr)
	case "prune":
		return runPrune(args[1:], environ, stdout, stderr)
	case "blobs":
		return runBlobs(args[1:], environ, stdout, stderr)
	case "reactions":
		return runReactions(args[1:], environ, stdout, stderr)
	case "seed":
		return runSeed(args[1:], environ, stdout, stderr)
	case "health":
		return runHealth(args[1:], environ, stdout, stderr)
	case "backup":
		return runBackup(args[1:], environ, stdout, stderr)
	case "epoch":
		return runEpoch(args[1:], environ, stdout, stderr)
	case "checkpoint":
		return runCheckpoint(args[1:], environ, stdout, stderr)
	case "help", "-h", "--help", "-help":
		usage(stdout)
		return 0
	default:
		_, _ = fmt.Fprintf(stderr, "syncd: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	_, _ = fmt.Fprint(w, `syncd is a sync server for the Syncular sync protocol (SSP2, wire 3).

Usage:
  syncd serve [flags]     run the server; "syncd serve --help" lists the flags
  syncd version           print version and build information
  syncd inspect ARGS...   decode and render SSP2 messages
  syncd prune [flags]     prune the commit log of every partition once
                          (the serve flags; --database, --retention-*)
  syncd blobs sweep       delete the orphan blobs of every partition once
                          (the serve flags; --database, --blob-*)
  syncd reactions list    list durable reactions (--partition, --status,
                          --type, --limit, --json)
  syncd reactions retry   reset dead letters to pending (--partition with
                          --key K, or --dead-letters [--type T])
  syncd reactions prune   delete completed and dead-lettered reactions past
                          their retention once (the serve flags)
  syncd seed [flags]      fill a project with synthetic rows for load tests
  syncd health [flags]    exit 0 when the admin listener's /readyz is 200, 1
                          otherwise (--url, --timeout; for health checks)
  syncd backup [flags]    copy a SQLite database consistently while the
                          server runs (--database, --out)
  syncd epoch rotate ...  new log epochs for restored partitions, so clients
                          re-bootstrap (--database, --partition P | --all)
  syncd checkpoint ...    list, declare, run and activate backfill
                          checkpoints (the serve flags; --database,
                          --schema; see syncd checkpoint --help)
  syncd help              show this help

With no flags, "syncd serve" runs the embedded todos demo schema on
http://127.0.0.1:8787 with a SQLite file ./syncd.db and development
authentication.
`)
}

func serve(args, environ []string, stdout, stderr io.Writer) int {
	res, err := config.Load(args, environ, stdout)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd serve: %v\n", err)
		return 2
	}
	cfg := res.Config
	if res.PrintConfig {
		return printConfig(stdout, cfg)
	}
	log, err := platform.NewLogger(cfg)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd serve: %v\n", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	return app.Run(cfg, platform.ReadStampedBuildInfo(stamp()), log, wiring.StorageModule, wiring.CheckpointDeclarations(cfg), app.WithBanner(stderr))
}

func printConfig(w io.Writer, cfg config.Config) int {
	cfg.Print(w)
	return 0
}

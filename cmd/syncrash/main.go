// Command syncrash proves crash durability: it runs "syncd serve" as a
// child process, pushes unique commits from several clients (each its own
// client id and actor, each commit its own id and rows), kills the server
// with SIGKILL at random moments, restarts it on the same database, and
// finally verifies that every acknowledged commit is in the log exactly
// once at the seq the server acknowledged, reads back, and replays as
// cached with that seq. Commits in flight at a kill are delivered again
// until answered: either cached (they were committed) or applied (they
// were not), and then checked like the others.
//
//	syncrash --database PATH_OR_URL [flags]
//
// Exit status: 0 when every check held, 1 on a violation or failure, 2 on
// usage errors. The database should be fresh (an empty SQLite path or an
// empty PostgreSQL schema).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/syncd-dev/syncd/test/syncdproc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func parse(args []string, stderr io.Writer) (config, string, error) {
	var cfg config
	var logPath string
	var seed int64
	fs := flag.NewFlagSet("syncrash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Binary, "syncd", "", "syncd executable (default: go build ./cmd/syncd of the module in the current directory)")
	fs.StringVar(&cfg.Database, "database", "", "--database of the server: a fresh SQLite path or postgres:// URL (required)")
	fs.IntVar(&cfg.Clients, "clients", 4, "concurrent pushing clients")
	fs.IntVar(&cfg.Ops, "ops", 3, "rows per commit")
	fs.IntVar(&cfg.Kills, "kills", 30, "SIGKILLs to deliver")
	fs.IntVar(&cfg.MaxCommits, "max-commits", 100_000, "bound on the commits of each client")
	fs.DurationVar(&cfg.KillWithin, "kill-within", 500*time.Millisecond, "each kill falls at a random moment this long at most after the restarted server's first acknowledgement")
	fs.Int64Var(&seed, "seed", 0, "seed of the kill moments (0: random, printed)")
	fs.StringVar(&logPath, "server-log", "", "append the servers' log lines to this file")
	fs.DurationVar(&cfg.ReadyLimit, "ready-timeout", 2*time.Minute, "how long a (re)started server may take to become ready")
	if err := fs.Parse(args); err != nil {
		return cfg, "", err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, "", fmt.Errorf("unexpected arguments %q", fs.Args())
	case cfg.Database == "":
		return cfg, "", errors.New("--database is required")
	case cfg.Clients < 1 || cfg.Ops < 1 || cfg.Ops > 400 || cfg.MaxCommits < 1 || cfg.Kills < 0:
		return cfg, "", errors.New("--clients, --ops (at most 400) and --max-commits must be positive, --kills not negative")
	case cfg.KillWithin <= 0:
		return cfg, "", errors.New("--kill-within must be positive")
	}
	cfg.Seed = uint64(seed)
	if seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		for _, x := range b {
			cfg.Seed = cfg.Seed<<8 | uint64(x)
		}
		cfg.Seed >>= 1 // fits --seed
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	cfg.RunID = hex.EncodeToString(id[:])
	return cfg, logPath, nil
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, logPath, err := parse(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			_, _ = fmt.Fprintln(stderr, "syncrash:", err)
		}
		return 2
	}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			_, _ = fmt.Fprintln(stderr, "syncrash:", err)
			return 1
		}
		defer func() { _ = f.Close() }()
		cfg.ServerLog = f
	}
	if cfg.Binary == "" {
		bin, remove, err := syncdproc.BuildTemp(ctx, "syncrash-")
		if err != nil {
			_, _ = fmt.Fprintln(stderr, "syncrash:", err)
			return 1
		}
		defer remove()
		cfg.Binary = bin
	}
	cfg.Progress = stdout
	_, _ = fmt.Fprintf(stdout, "syncrash: seed %d, %d clients, %d rows per commit, %d kills\n", cfg.Seed, cfg.Clients, cfg.Ops, cfg.Kills)
	rep, err := run(ctx, cfg)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "syncrash:", err)
		return 1
	}
	printReport(stdout, rep)
	if rep.failed() {
		return 1
	}
	return 0
}

func printReport(w io.Writer, rep *report) {
	_, _ = fmt.Fprintf(w, "kills %d, acknowledged commits %d, in flight at a failure %d (committed before it %d, redone %d), retried 5xx %d\n",
		rep.Kills, rep.Acked, rep.Uncertain, rep.Survived, rep.Redone, rep.ServerError)
	if !rep.failed() {
		_, _ = fmt.Fprintln(w, "PASS: every acknowledged commit is in the log once at its seq and replays as cached")
		return
	}
	_, _ = fmt.Fprintf(w, "FAIL: %d violations (seed %d)\n", len(rep.Violations), rep.Seed)
	for i, v := range rep.Violations {
		if i == 30 {
			_, _ = fmt.Fprintf(w, "  … and %d more\n", len(rep.Violations)-i)
			break
		}
		_, _ = fmt.Fprintln(w, "  "+v)
	}
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
)

// databaseFlag is --database with serve's default and SYNCD_DATABASE.
func databaseFlag(fs *flag.FlagSet, environ []string) *string {
	def := config.Default().Database
	for _, kv := range environ {
		if v, ok := cutPrefix(kv, "SYNCD_DATABASE="); ok && v != "" {
			def = v
		}
	}
	return fs.String("database", def, "the server's database: a SQLite path (sqlite:PATH) or a postgres:// URL (default: serve's, or SYNCD_DATABASE)")
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

// runBackup implements "syncd backup": an online, consistent copy of a
// SQLite database, safe while the server runs. PostgreSQL is backed up
// with its own tools.
func runBackup(args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("syncd backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := databaseFlag(fs, environ)
	out := fs.String("out", "", "the backup file to create (never overwritten)")
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, `Usage: syncd backup --database PATH --out FILE

Copies a SQLite database consistently while the server keeps running (one
snapshot, written with VACUUM INTO). For PostgreSQL use pg_dump or
continuous archiving (PITR); see docs/backup.md.

After restoring ANY backup, run "syncd epoch rotate --all" before serving:
clients then re-bootstrap instead of silently keeping changes the backup
does not have (SPEC 2.1).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *out == "" || fs.NArg() > 0 {
		_, _ = fmt.Fprintln(stderr, "syncd backup: --out FILE is required (and nothing else)")
		return 2
	}
	kind, path, err := config.ParseDatabase(*db)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd backup: %v\n", err)
		return 2
	}
	if kind != config.SQLite {
		_, _ = fmt.Fprintln(stderr, "syncd backup: PostgreSQL is backed up with its own tools (pg_dump, or base backups with WAL archiving);\nafter restoring, run \"syncd epoch rotate --all\" against it before serving")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := sqlite.Backup(ctx, path, *out); err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd backup: %v\n", err)
		return 1
	}
	st, _ := os.Stat(*out)
	size := int64(0)
	if st != nil {
		size = st.Size()
	}
	_, _ = fmt.Fprintf(stdout, "backed up %s to %s (%d bytes)\n", path, *out, size)
	return 0
}

// runEpoch implements "syncd epoch rotate": a new log epoch for restored
// partitions (SPEC §2.1), so clients reset and re-bootstrap.
func runEpoch(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "rotate" {
		_, _ = fmt.Fprintln(stderr, "Usage: syncd epoch rotate --database DB (--partition P ... | --all)")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return 0
		}
		return 2
	}
	fs := flag.NewFlagSet("syncd epoch rotate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := databaseFlag(fs, environ)
	var parts partitionList
	fs.Var(&parts, "partition", "a partition to rotate (repeatable)")
	all := fs.Bool("all", false, "rotate every registered partition")
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, `Usage: syncd epoch rotate --database DB (--partition P ... | --all)

Mints a new log epoch for each partition and deletes its client cursor
records: every client's next request is told to reset and re-bootstraps.
Run it after restoring a backup, before serving (SPEC 2.1), or against a
running server (its clients reset on their next round).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if (*all) == (len(parts) > 0) || fs.NArg() > 0 {
		_, _ = fmt.Fprintln(stderr, "syncd epoch rotate: name --partition P (repeatable) or --all, not both")
		return 2
	}
	kind, path, err := config.ParseDatabase(*db)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd epoch rotate: %v\n", err)
		return 2
	}
	if kind == config.SQLite {
		if _, err := os.Stat(path); err != nil { // never create a database to rotate it
			_, _ = fmt.Fprintf(stderr, "syncd epoch rotate: database %s: %v\n", path, err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := config.Default()
	cfg.Database = *db
	st, err := wiring.OpenStorage(ctx, cfg, platform.NewClock())
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd epoch rotate: %v\n", err)
		return 1
	}
	defer func() { _ = st.Close() }()
	if *all {
		infos, err := st.ListPartitions(ctx)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "syncd epoch rotate: list partitions: %v\n", err)
			return 1
		}
		for _, in := range infos {
			parts = append(parts, in.Partition)
		}
	}
	failed := false
	for _, p := range parts {
		if _, ok, err := st.LogEpoch(ctx, p); err != nil || !ok {
			_, _ = fmt.Fprintf(stderr, "syncd epoch rotate: partition %q: not registered (%v)\n", p, err)
			failed = true
			continue
		}
		epoch, err := st.RotateLogEpoch(ctx, p)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "syncd epoch rotate: partition %q: %v\n", p, err)
			failed = true
			continue
		}
		_, _ = fmt.Fprintf(stdout, "partition %q: new log epoch %s\n", p, epoch)
	}
	_, _ = fmt.Fprintf(stdout, "rotated %d partitions\n", len(parts))
	if failed {
		return 1
	}
	return 0
}

// partitionList is a repeatable --partition.
type partitionList []string

func (p *partitionList) String() string     { return fmt.Sprint(*p) }
func (p *partitionList) Set(v string) error { *p = append(*p, v); return nil }

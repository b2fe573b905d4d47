package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/reactions"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/ports"
)

const reactionsUsage = `Usage:
  syncd reactions list  [--database DB] [--partition P] [--status S] [--type T] [--limit N] [--json]
  syncd reactions retry [--database DB] --partition P --key K ...
  syncd reactions retry [--database DB] --dead-letters [--partition P] [--type T]
  syncd reactions prune [serve flags]

list prints durable reactions (SPEC 6.9) oldest first: every partition's,
or one's, filtered by status (pending, leased, completed, dead-letter) and
handler type (both repeatable or comma-separated), as a table or, with
--json, one JSON object per line. Payloads are never shown.

retry resets dead-lettered reactions to pending, due at once, with their
attempts and failure cleared: the keys named (the idempotency keys list
shows), or with --dead-letters every dead letter of the partition (of
every partition without --partition), of the types given. It is safe
beside running servers: a reaction pruned or retried meanwhile is skipped.

prune deletes completed and dead-lettered reactions past their retention
once, in every registered partition, as the server does every
--reaction-prune-interval; it takes the server's flags, file and
environment (--database and --reaction-keep-* matter here).

Exit status: 0 on success, 1 when a key was not a dead letter or the
database failed, 2 on usage errors.

Flags:
`

const reactionsPruneUsage = `Usage: syncd reactions prune [flags]

Deletes the completed and dead-lettered durable reactions (SPEC 6.9) past
--reaction-keep-completed and --reaction-keep-dead-letter once, in every
registered partition, as the server does every --reaction-prune-interval.
It takes the server's flags, file and environment (--database and the
--reaction-keep-* settings matter here); it never deletes pending or
leased reactions and never creates a database.
`

// multiFlag collects a repeatable, comma-separated flag.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*m = append(*m, s)
		}
	}
	return nil
}

type reactionsFlags struct {
	fs          *flag.FlagSet
	db          *string
	partition   *string
	statuses    multiFlag
	types       multiFlag
	keys        multiFlag
	limit       *int
	json        *bool
	deadLetters *bool
}

func newReactionsFlags(name string, stderr io.Writer, environ []string) *reactionsFlags {
	f := &reactionsFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.db = databaseFlag(f.fs, environ)
	f.partition = f.fs.String("partition", "", "one partition (default: every registered partition)")
	f.fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, reactionsUsage)
		f.fs.PrintDefaults()
	}
	return f
}

// runReactions implements "syncd reactions list|retry".
func runReactions(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "prune" {
		return runReactionsPrune(args[1:], environ, stdout, stderr)
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "retry") {
		_, _ = fmt.Fprint(stderr, reactionsUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return 0
		}
		return 2
	}
	cmd := args[0]
	f := newReactionsFlags("syncd reactions "+cmd, stderr, environ)
	f.fs.Var(&f.types, "type", "handler type (repeatable, or comma-separated)")
	if cmd == "list" {
		f.fs.Var(&f.statuses, "status", "pending, leased, completed or dead-letter (repeatable, or comma-separated)")
		f.limit = f.fs.Int("limit", 100, "at most this many reactions")
		f.json = f.fs.Bool("json", false, "one JSON object per line instead of a table")
	} else {
		f.fs.Var(&f.keys, "key", "an idempotency key to retry (repeatable; needs --partition)")
		f.deadLetters = f.fs.Bool("dead-letters", false, "retry every dead letter (of --partition, of --type)")
	}
	if err := f.fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usageErr := func(msg string) int {
		_, _ = fmt.Fprintf(stderr, "syncd reactions %s: %s\n", cmd, msg)
		return 2
	}
	if f.fs.NArg() > 0 {
		return usageErr("unexpected argument " + f.fs.Arg(0))
	}
	for _, s := range f.statuses {
		switch ports.ReactionStatus(s) {
		case ports.ReactionPending, ports.ReactionLeased, ports.ReactionCompleted, ports.ReactionDeadLetter:
		default:
			return usageErr(fmt.Sprintf("--status %q: want pending, leased, completed or dead-letter", s))
		}
	}
	if cmd == "list" && *f.limit < 1 {
		return usageErr("--limit must be at least 1")
	}
	if cmd == "retry" {
		switch {
		case *f.deadLetters == (len(f.keys) > 0):
			return usageErr("name --key K (repeatable) or --dead-letters, not both")
		case len(f.keys) > 0 && *f.partition == "":
			return usageErr("--key needs --partition")
		case len(f.keys) > 0 && len(f.types) > 0:
			return usageErr("--type goes with --dead-letters")
		}
	}
	kind, path, err := config.ParseDatabase(*f.db)
	if err != nil {
		return usageErr(err.Error())
	}
	fail := func(err error) int {
		_, _ = fmt.Fprintf(stderr, "syncd reactions %s: %v\n", cmd, err)
		return 1
	}
	if kind == config.SQLite {
		if _, err := os.Stat(path); err != nil { // never create a database to read it
			return fail(fmt.Errorf("database: %w", err))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := config.Default()
	cfg.Database = *f.db
	clk := platform.NewClock()
	st, err := wiring.OpenStorage(ctx, cfg, clk)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = st.Close() }()
	q, okQ := st.(ports.ReactionQueue)
	l, okL := st.(ports.ReactionLister)
	if !okQ || !okL {
		return fail(errors.New("the storage keeps no reaction queue"))
	}
	parts := []string{*f.partition}
	if *f.partition == "" {
		infos, err := st.ListPartitions(ctx)
		if err != nil {
			return fail(fmt.Errorf("list partitions: %w", err))
		}
		parts = parts[:0]
		for _, in := range infos {
			parts = append(parts, in.Partition)
		}
	}
	if cmd == "list" {
		return listReactions(ctx, l, parts, f, stdout, fail)
	}
	now := clk.Now().UnixMilli()
	if len(f.keys) > 0 {
		code := 0
		for _, k := range f.keys {
			ok, err := q.RetryReaction(ctx, *f.partition, k, now)
			if err != nil {
				return fail(err)
			}
			if !ok {
				_, _ = fmt.Fprintf(stderr, "syncd reactions retry: partition %q: %s is not a dead letter (or does not exist)\n", *f.partition, k)
				code = 1
				continue
			}
			_, _ = fmt.Fprintf(stdout, "partition %q: %s retried\n", *f.partition, k)
		}
		return code
	}
	total := 0
	for _, p := range parts {
		res, err := reactions.RetryDeadLetters(ctx, q, l, p, f.types, now)
		total += res.Retried
		if res.Retried > 0 || res.Skipped > 0 || *f.partition != "" {
			_, _ = fmt.Fprintf(stdout, "partition %q: retried %d dead letters", p, res.Retried)
			if res.Skipped > 0 {
				_, _ = fmt.Fprintf(stdout, " (%d pruned or retried meanwhile)", res.Skipped)
			}
			_, _ = fmt.Fprintln(stdout)
		}
		if err != nil {
			return fail(fmt.Errorf("partition %q: %w", p, err))
		}
	}
	_, _ = fmt.Fprintf(stdout, "retried %d dead letters in %d partitions\n", total, len(parts))
	return 0
}

// reactionJSON is one line of "syncd reactions list --json".
type reactionJSON struct {
	Partition      string          `json:"partition"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Type           string          `json:"type"`
	Version        int32           `json:"version"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	AvailableAt    *string         `json:"availableAt"`
	LeaseExpiresAt *string         `json:"leaseExpiresAt"`
	CompletedAt    *string         `json:"completedAt"`
	LastFailure    json.RawMessage `json:"lastFailure"`
	Source         struct {
		ClientID       string  `json:"clientId"`
		ClientCommitID string  `json:"clientCommitId"`
		CommitSeq      int64   `json:"commitSeq"`
		CreatedAt      *string `json:"createdAt"`
	} `json:"source"`
}

func listReactions(ctx context.Context, l ports.ReactionLister, parts []string, f *reactionsFlags, stdout io.Writer, fail func(error) int) int {
	statuses := make([]ports.ReactionStatus, len(f.statuses))
	for i, s := range f.statuses {
		statuses[i] = ports.ReactionStatus(s)
	}
	var tw *tabwriter.Writer
	if !*f.json {
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "PARTITION\tSTATUS\tTYPE\tVERSION\tATTEMPTS\tDUE/DONE\tFAILURE\tKEY")
	}
	left := *f.limit
	for _, p := range parts {
		if left == 0 {
			break
		}
		rs, err := reactions.List(ctx, l, p, ports.ReactionListQuery{Statuses: statuses, Types: f.types}, left)
		if err != nil {
			return fail(fmt.Errorf("partition %q: %w", p, err))
		}
		left -= len(rs)
		for _, r := range rs {
			if tw == nil {
				b, err := json.Marshal(toReactionJSON(p, r))
				if err != nil {
					return fail(err)
				}
				_, _ = fmt.Fprintf(stdout, "%s\n", b)
				continue
			}
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\n", p, r.Status, r.Type, r.Version, r.Attempts, r.MaxAttempts,
				dueOrDone(r), failureCode(r.LastFailure), r.IdempotencyKey)
		}
	}
	if tw != nil {
		_ = tw.Flush()
	}
	return 0
}

func toReactionJSON(partition string, r ports.StoredReaction) reactionJSON {
	j := reactionJSON{Partition: partition, IdempotencyKey: r.IdempotencyKey, Type: r.Type, Version: r.Version,
		Status: string(r.Status), Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, AvailableAt: msTime(r.AvailableAtMs),
		LeaseExpiresAt: msTime(r.LeaseExpiresAt), CompletedAt: msTime(r.CompletedAtMs), LastFailure: json.RawMessage("null")}
	if len(r.LastFailure) > 0 && json.Valid(r.LastFailure) {
		j.LastFailure = json.RawMessage(r.LastFailure)
	}
	j.Source.ClientID, j.Source.ClientCommitID, j.Source.CommitSeq = r.Source.ClientID, r.Source.ClientCommitID, r.Source.CommitSeq
	j.Source.CreatedAt = msTime(r.Source.CreatedAtMs)
	return j
}

// msTime renders a millisecond time as RFC 3339 UTC; 0 is null.
func msTime(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	return &s
}

// dueOrDone is the time that matters for the status: when a pending
// reaction is due, a lease expires, a reaction completed or dead-lettered.
func dueOrDone(r ports.StoredReaction) string {
	ms := r.AvailableAtMs
	switch r.Status {
	case ports.ReactionLeased:
		ms = r.LeaseExpiresAt
	case ports.ReactionCompleted:
		ms = r.CompletedAtMs
	}
	if s := msTime(ms); s != nil {
		return *s
	}
	return "-"
}

// failureCode is the stored failure's code ("-" without one).
func failureCode(failure []byte) string {
	var f struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(failure, &f) != nil || f.Code == "" {
		return "-"
	}
	return f.Code
}

// runReactionsPrune implements "syncd reactions prune": one retention
// pass over every registered partition with the server's settings.
func runReactionsPrune(args, environ []string, stdout, stderr io.Writer) int {
	// Pruning authenticates nobody: --auth only matters to serve.
	environ = append([]string{config.EnvName("auth") + "=" + config.AuthDev}, environ...)
	res, err := config.LoadFor(reactionsPruneUsage, args, environ, stdout)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd reactions prune: %v\n", err)
		return 2
	}
	cfg := res.Config
	fail := func(err error) int {
		_, _ = fmt.Fprintf(stderr, "syncd reactions prune: %v\n", err)
		return 1
	}
	if kind, path, err := config.ParseDatabase(cfg.Database); err == nil && kind == config.SQLite {
		if _, err := os.Stat(path); err != nil {
			return fail(fmt.Errorf("database: %w", err))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	clk := platform.NewClock()
	st, err := wiring.OpenStorage(ctx, cfg, clk)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = st.Close() }()
	q, ok := st.(ports.ReactionQueue)
	if !ok {
		return fail(errors.New("the storage keeps no reaction queue"))
	}
	p, err := wiring.ReactionPruner(cfg, q, st, clk, nil, nil)
	if err != nil {
		return fail(err)
	}
	results, err := p.PruneAll(ctx)
	completed, dead := 0, 0
	for _, r := range results {
		completed, dead = completed+r.Completed, dead+r.DeadLetters
		if r.Completed+r.DeadLetters > 0 {
			more := ""
			if r.MayHaveMore {
				more = " (more remain; run again)"
			}
			_, _ = fmt.Fprintf(stdout, "partition %q: removed %d completed, %d dead-lettered reactions%s\n", r.Partition, r.Completed, r.DeadLetters, more)
		}
	}
	_, _ = fmt.Fprintf(stdout, "pruned %d partitions, removed %d completed and %d dead-lettered reactions\n", len(results), completed, dead)
	if err != nil {
		return fail(err)
	}
	return 0
}

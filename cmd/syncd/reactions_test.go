package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestReactionsCommandUsage(t *testing.T) {
	db := filepath.Join(t.TempDir(), "syncd.db")
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		wantOut string
		wantErr string
	}{
		{name: "no subcommand", args: []string{"reactions"}, code: 2, wantErr: "syncd reactions list"},
		{name: "unknown subcommand", args: []string{"reactions", "purge"}, code: 2, wantErr: "syncd reactions retry"},
		{name: "help", args: []string{"reactions", "--help"}, code: 0, wantErr: "Usage:"},
		{name: "list help", args: []string{"reactions", "list", "--help"}, code: 0, wantErr: "-status"},
		{name: "bad status", args: []string{"reactions", "list", "--status", "done"}, code: 2, wantErr: `--status "done"`},
		{name: "bad limit", args: []string{"reactions", "list", "--limit", "0"}, code: 2, wantErr: "--limit"},
		{name: "retry nothing", args: []string{"reactions", "retry", "--partition", "p"}, code: 2, wantErr: "--key K (repeatable) or --dead-letters"},
		{name: "retry both", args: []string{"reactions", "retry", "--partition", "p", "--key", "k", "--dead-letters"}, code: 2, wantErr: "not both"},
		{name: "key without partition", args: []string{"reactions", "retry", "--key", "k"}, code: 2, wantErr: "--key needs --partition"},
		{name: "key with type", args: []string{"reactions", "retry", "--partition", "p", "--key", "k", "--type", "mail"}, code: 2, wantErr: "--type goes with --dead-letters"},
		{name: "missing database", args: []string{"reactions", "list", "--database", db}, code: 1, wantErr: "database:"},
		{name: "prune help", args: []string{"reactions", "prune", "--help"}, code: 0, wantOut: "--reaction-keep-dead-letter"},
		{name: "prune bad retention", args: []string{"reactions", "prune", "--reaction-keep-completed", "0s"}, code: 2, wantErr: "--reaction-keep-completed"},
		{name: "prune missing database", args: []string{"reactions", "prune", "--database", db}, code: 1, wantErr: "database:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tc.args, nil, nil, &out, &errOut); code != tc.code {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) || !strings.Contains(errOut.String(), tc.wantErr) {
				t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
			}
		})
	}
}

func TestReactionsCommand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		database func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testReactionsCommand(t, tc.database(t)) })
	}
}

// testReactionsCommand: dead letters a, c (types mail, sms) and a
// completed b are listed and filtered; retry resets dead letters only.
func testReactionsCommand(t *testing.T, database string) {
	ctx := context.Background()
	st, err := wiring.OpenStorage(ctx, config.Config{Database: database}, platform.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sch := ssptest.Schema(t)
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	if _, err := st.TouchPartition(ctx, "p", now); err != nil {
		t.Fatal(err)
	}
	if err := st.Push(ctx, "p", ports.PushOptions{WriterVersion: sch.Version}, func(tx ports.PushTx) error {
		seq, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: now, ActorID: "u", ClientID: "c", ClientCommitID: "cc"})
		if err != nil {
			return err
		}
		rs := []ports.Reaction{
			{IdempotencyKey: "a", Type: "mail", Version: 1, Payload: []byte(`{"secret":1}`), MaxAttempts: 1, AvailableAtMs: now},
			{IdempotencyKey: "b", Type: "mail", Version: 1, Payload: []byte(`{}`), MaxAttempts: 1, AvailableAtMs: now},
			{IdempotencyKey: "c", Type: "sms", Version: 2, Payload: []byte(`{}`), MaxAttempts: 1, AvailableAtMs: now},
		}
		return tx.EnqueueReactions(ctx, ports.ReactionSource{ClientID: "c", ClientCommitID: "cc", CommitSeq: seq, CreatedAtMs: now}, rs)
	}); err != nil {
		t.Fatal(err)
	}
	q := st.(ports.ReactionQueue)
	if got, err := q.ClaimReactions(ctx, "p", ports.ReactionClaim{LeaseOwner: "w", Types: []string{"mail", "sms"}, NowMs: now, LeaseDurationMs: 1000, Limit: 3}); err != nil || len(got) != 3 {
		t.Fatalf("claim: %d %v", len(got), err)
	}
	for _, k := range []string{"a", "c"} {
		if ok, err := q.FailReaction(ctx, "p", k, ports.ReactionFailure{LeaseOwner: "w", Failure: []byte(`{"code":"mail.down","atMs":1}`), AtMs: now}); err != nil || !ok {
			t.Fatalf("fail %s: %v %v", k, ok, err)
		}
	}
	if ok, err := q.CompleteReaction(ctx, "p", "b", "w", now); err != nil || !ok {
		t.Fatalf("complete: %v %v", ok, err)
	}
	cli := func(want int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append(append([]string{"reactions"}, args...), "--database", database), nil, nil, &out, &errOut); code != want {
			t.Fatalf("%v: exit %d, want %d (stdout %q, stderr %q)", args, code, want, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	statuses := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for line := range strings.SplitSeq(strings.TrimSpace(cli(0, "list", "--json")), "\n") {
			var r reactionJSON
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			if r.Partition != "p" || r.Source.ClientCommitID != "cc" || r.Source.CommitSeq != 1 {
				t.Fatalf("line %q", line)
			}
			out[r.IdempotencyKey] = r.Status
		}
		return out
	}
	if got := statuses(); got["a"] != "dead-letter" || got["b"] != "completed" || got["c"] != "dead-letter" || len(got) != 3 {
		t.Fatalf("listed %v", got)
	}
	if out := cli(0, "list", "--json", "--partition", "p"); strings.Contains(out, "secret") || !strings.Contains(out, `"lastFailure":{"code":"mail.down","atMs":1}`) {
		t.Fatalf("json list %q", out)
	}
	table := cli(0, "list", "--status", "dead-letter", "--type", "mail")
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "PARTITION") ||
		!strings.Contains(lines[1], "dead-letter") || !strings.Contains(lines[1], "mail.down") || !strings.HasSuffix(lines[1], " a") {
		t.Fatalf("table %q", table)
	}
	if out := cli(0, "list", "--limit", "1", "--json"); strings.Count(out, "\n") != 1 {
		t.Fatalf("--limit 1: %q", out)
	}
	if out := cli(1, "retry", "--partition", "p", "--key", "b"); !strings.Contains(out, "b is not a dead letter") {
		t.Fatalf("retry of a completed reaction: %q", out)
	}
	if out := cli(0, "retry", "--dead-letters", "--type", "mail"); !strings.Contains(out, `partition "p": retried 1 dead letters`) {
		t.Fatalf("retry --dead-letters: %q", out)
	}
	if got := statuses(); got["a"] != "pending" || got["b"] != "completed" || got["c"] != "dead-letter" {
		t.Fatalf("after retrying the mail dead letters: %v", got)
	}
	if out := cli(0, "retry", "--partition", "p", "--key", "c"); !strings.Contains(out, `partition "p": c retried`) {
		t.Fatalf("retry c: %q", out)
	}
	r, err := st.GetReaction(ctx, "p", "c")
	if err != nil || r.Status != ports.ReactionPending || r.Attempts != 0 || r.LastFailure != nil {
		t.Fatalf("c after retry: %+v %v", r, err)
	}
	// Prune: the default retention keeps the young completed b; a short
	// one removes it and never the pending a and c.
	if out := cli(0, "prune"); !strings.Contains(out, "removed 0 completed and 0 dead-lettered") {
		t.Fatalf("prune with the defaults: %q", out)
	}
	time.Sleep(5 * time.Millisecond)
	if out := cli(0, "prune", "--reaction-keep-completed", "1ms"); !strings.Contains(out, `partition "p": removed 1 completed, 0 dead-lettered reactions`) {
		t.Fatalf("prune: %q", out)
	}
	if got := statuses(); len(got) != 2 || got["a"] != "pending" || got["c"] != "pending" {
		t.Fatalf("after prune: %v", got)
	}
}

package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/syncdproc/proctest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, "syncrash-test-", &binary)) }

// small is the suite's run: a few kills, a bounded number of commits.
func small(database string, seed uint64) config {
	return config{
		Binary: binary, Database: database, Clients: 3, Ops: 2, Kills: 3, MaxCommits: 5000,
		KillWithin: 200 * time.Millisecond, Seed: seed, RunID: fmt.Sprint("t", seed),
	}
}

// Every acknowledged commit survives SIGKILLs: in the log once at its
// acknowledged seq, readable, and replayed as cached; on both engines.
func TestCrashDurability(t *testing.T) {
	engines := []struct {
		name     string
		database func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			cfg := small(e.database(t), 1)
			cfg.ServerLog = &tailWriter{}
			rep, err := run(t.Context(), cfg)
			if err != nil {
				t.Fatalf("%v\n%s", err, cfg.ServerLog)
			}
			var out strings.Builder
			printReport(&out, rep)
			t.Log(out.String())
			if rep.failed() {
				t.Fatal(out.String())
			}
			if rep.Kills != cfg.Kills || rep.Acked == 0 || rep.Uncertain == 0 {
				t.Fatalf("the run did not exercise kills: %s", out.String())
			}
		})
	}
}

// The checks are real: storage faults injected while the server is down
// (what a server that acknowledged before its commit was durable, or that
// lost idempotency records, would leave behind) fail the run with the
// matching violation.
func TestCrashChecksCatchFaults(t *testing.T) {
	faults := []struct {
		name  string
		stmts []string // run with the last acknowledged commit's client id, commit id
		want  string
	}{
		{
			name: "acknowledged commit lost",
			stmts: []string{
				`DELETE FROM sync_changes WHERE commit_seq IN (SELECT commit_seq FROM sync_commits WHERE client_id = ?1 AND client_commit_id = ?2)`,
				`DELETE FROM sync_commits WHERE client_id = ?1 AND client_commit_id = ?2`,
			},
			want: "is not in the log",
		},
		{
			name:  "idempotency record lost",
			stmts: []string{`DELETE FROM sync_push_results WHERE client_id = ?1 AND client_commit_id = ?2`},
			want:  "want cached at seq",
		},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "syncd.db")
			cfg := small(path, 2)
			cfg.Kills = 1
			var victim ackedCommit
			cfg.beforeRestart = func(ctx context.Context, acked []ackedCommit) error {
				victim = acked[len(acked)-1]
				db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
				if err != nil {
					return err
				}
				defer func() { _ = db.Close() }()
				for _, q := range f.stmts {
					res, err := db.ExecContext(ctx, q, victim.ClientID, victim.ClientCommitID)
					if err != nil {
						return err
					}
					if n, _ := res.RowsAffected(); n == 0 {
						return fmt.Errorf("%s: no row for %+v", q, victim)
					}
				}
				return nil
			}
			rep, err := run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			printReport(&out, rep)
			t.Log(out.String())
			if !rep.failed() {
				t.Fatalf("the injected fault went unnoticed:\n%s", out.String())
			}
			found := false
			for _, v := range rep.Violations {
				found = found || (strings.Contains(v, victim.ClientCommitID+",") || strings.Contains(v, victim.ClientCommitID+":")) && strings.Contains(v, f.want)
			}
			if !found {
				t.Fatalf("no violation %q names %s:\n%s", f.want, victim.ClientCommitID, out.String())
			}
		})
	}
}

// tailWriter keeps the last server log lines for a failure message.
type tailWriter struct{ lines []string }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.lines = append(w.lines, strings.TrimRight(string(p), "\n"))
	if len(w.lines) > 60 {
		w.lines = w.lines[len(w.lines)-60:]
	}
	return len(p), nil
}

func (w *tailWriter) String() string { return strings.Join(w.lines, "\n") }

var _ io.Writer = (*tailWriter)(nil)

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestPruneCommand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		database func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testPruneCommand(t, tc.database(t)) })
	}
}

func testPruneCommand(t *testing.T, database string) {
	ctx := context.Background()
	st, err := wiring.OpenStorage(ctx, config.Config{Database: database}, platform.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	sch := ssptest.Schema(t)
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TouchPartition(ctx, "p", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	err = st.Push(ctx, "p", ports.PushOptions{WriterVersion: sch.Version}, func(tx ports.PushTx) error {
		for i := range 1200 {
			id := fmt.Sprintf("r%d", i)
			if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: time.Now().UnixMilli(), ActorID: "a", ClientID: "c", ClientCommitID: id,
				Changes: []commit.Change{{Table: "projects", RowID: id, Op: commit.OpDelete, Scopes: map[string]string{"owner": "o"}}}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"prune", "--database", database}, nil, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `partition "p": horizon 0 -> 200, removed 200 commits`) {
		t.Fatalf("output %q", out.String())
	}
	// The horizon is stored: a second run removes nothing.
	out.Reset()
	if code := run([]string{"prune", "--database", database}, nil, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `partition "p": horizon 200 -> 200, removed 0 commits`) {
		t.Fatalf("second run %q", out.String())
	}
	// The tests' retention prunes down to the active clients' floor: with
	// no client recorded, the whole log, loudly.
	out.Reset()
	errOut.Reset()
	if code := run([]string{"prune", "--database", database, "--prune-to-active-floors-UNSAFE-for-tests", "--retention-active-window", "1h",
		"--client-record-refresh", "1m"}, nil, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `partition "p": horizon 200 -> 1200, removed 1000 commits`) || !strings.Contains(errOut.String(), "UNSAFE") {
		t.Fatalf("to the active floors: %q, %q", out.String(), errOut.String())
	}
	if code := run([]string{"prune", "--database", database, "--prune-to-active-floors-UNSAFE-for-tests", "--listen", "0.0.0.0:8787"},
		nil, nil, &out, &errOut); code == 0 {
		t.Fatal("the tests' retention ran with a production listener")
	}
	if code := run([]string{"prune", "--database", "sqlite:"}, nil, nil, &out, &errOut); code == 0 {
		t.Fatal("bad database accepted")
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if code := run([]string{"prune", "--database", missing}, nil, nil, &out, &errOut); code == 0 {
		t.Fatal("missing database accepted")
	}
}

// prune speaks for itself and does not ask for serve's authentication.
func TestPruneUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"prune", "--help"}, nil, nil, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "Usage: syncd prune") {
		t.Fatalf("help: exit %d: %.80q", code, out.String())
	}
	out.Reset()
	missing := filepath.Join(t.TempDir(), "missing.db")
	if code := run([]string{"prune", "--schema", "x.json", "--database", missing}, nil, nil, &out, &errb); code != 1 ||
		strings.Contains(errb.String(), "--auth") || !strings.Contains(errb.String(), "missing.db") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("prune created the database")
	}
}

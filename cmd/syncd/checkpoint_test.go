package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app/checkpoint"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/app/wiring"
	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestCheckpointCommand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		database func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testCheckpointCommand(t, tc.database(t)) })
	}
}

// seedNullEstimates writes n tasks without an estimate, as a client would.
func seedNullEstimates(t *testing.T, database string, n int) {
	t.Helper()
	ctx := context.Background()
	st, err := wiring.OpenStorage(ctx, config.Config{Database: database}, platform.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	sch := ssptest.Schema(t)
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	svc, err := push.New(push.Options{Schema: func() *schema.Schema { return sch }, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	tasks := sch.Table("tasks")
	var ops []ssp2.PushOperation
	for i := range n {
		id := fmt.Sprintf("t%02d", i)
		ops = append(ops, ssptest.Upsert("tasks", id, ssptest.Sparse(t, tasks, ssptest.Cols{"id": rowcodec.String(id),
			"project_id": rowcodec.String("alpha"), "title": rowcodec.String(id), "done": rowcodec.Bool(false),
			"estimate": rowcodec.Null(), "attachment": rowcodec.Null()}), -1))
	}
	if _, err := svc.ApplyServerCommit(ctx, push.ServerCommit{Partition: "p", ActorID: "alice", ClientID: "c1", ClientCommitID: "seed", Operations: ops}); err != nil {
		t.Fatal(err)
	}
}

func nullEstimates(t *testing.T, database string) int {
	t.Helper()
	ctx := context.Background()
	st, err := wiring.OpenStorage(ctx, config.Config{Database: database}, platform.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	sch := ssptest.Schema(t)
	// Declaring it: the checkpoint may be pending, which refuses others.
	if err := st.EnsureSchema(ctx, sch, []cpdomain.Declaration{{Partition: "p", Name: "estimates", SchemaVersion: sch.Version}}); err != nil {
		t.Fatal(err)
	}
	rows, err := st.(ports.TableScanner).ScanTable(ctx, "p", ports.TableScan{Table: "tasks", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rows {
		if ssptest.DecodeRow(t, sch.Table("tasks"), r.Payload)["estimate"].IsNull() {
			n++
		}
	}
	return n
}

func testCheckpointCommand(t *testing.T, database string) {
	seedNullEstimates(t, database, 5)
	irPath := filepath.Join(t.TempDir(), "schema.ir.json")
	if err := os.WriteFile(irPath, ssptest.IR(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"checkpoint"}, append(args, "--database", database, "--schema", irPath)...), nil, nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	steps := []struct {
		name      string
		args      []string
		code      int
		stdout    []string
		stderr    []string
		nullsLeft int
	}{
		{"list before any", []string{"list"}, 0, []string{"no checkpoints"}, nil, 5},
		{"run needs a backfill", []string{"run", "--partition", "p", "--name", "estimates"}, 1, nil, []string{"sync.backfill.unregistered", "--table T --set COLUMN=JSON"}, 5},
		{"declare", []string{"declare", "--partition", "p", "--name", "estimates"}, 0, []string{"checkpoint p/estimates: declared at schema version 2"}, nil, 5},
		{"list declared", []string{"list"}, 0, []string{"PARTITION", "estimates", "declared", "pending"}, nil, 5},
		{"activate before the pass", []string{"activate", "--partition", "p", "--name", "estimates", "--table", "tasks"}, 1, nil, []string{"sync.backfill.incomplete"}, 5},
		{"bad fill", []string{"run", "--partition", "p", "--name", "estimates", "--table", "tasks", "--set", "estimate=\"x\""}, 1, nil, []string{"sync.backfill.invalid_spec"}, 5},
		{"run fills and activates", []string{"run", "--partition", "p", "--name", "estimates", "--table", "tasks", "--set", "estimate=0", "--batch-rows=2"},
			0, []string{"p/estimates claimed: epoch 1", "p/estimates scan:", "activation activated", "checkpoint p/estimates: activated (batches 3, rows written 5"}, nil, 0},
		{"list activated", []string{"list", "--partition", "p"}, 0, []string{"estimates", "activated", "complete"}, nil, 0},
		{"activate is idempotent", []string{"activate", "--partition", "p", "--name", "estimates"}, 0, []string{"checkpoint p/estimates: activated"}, nil, 0},
		{"usage", []string{"frobnicate"}, 2, nil, []string{"unknown subcommand"}, 0},
		{"name required", []string{"declare", "--partition", "p"}, 2, nil, []string{"--partition and --name are required"}, 0},
	}
	for _, s := range steps {
		code, out, errOut := cmd(s.args...)
		if code != s.code {
			t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", s.name, code, s.code, out, errOut)
		}
		for _, w := range s.stdout {
			if !strings.Contains(out, w) {
				t.Fatalf("%s: stdout lacks %q:\n%s", s.name, w, out)
			}
		}
		for _, w := range s.stderr {
			if !strings.Contains(errOut, w) {
				t.Fatalf("%s: stderr lacks %q:\n%s", s.name, w, errOut)
			}
		}
		if n := nullEstimates(t, database); n != s.nullsLeft {
			t.Fatalf("%s: %d rows without an estimate, want %d", s.name, n, s.nullsLeft)
		}
	}
}

func TestCheckpointUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"checkpoint", "--help"}, nil, nil, &out, &errOut); code != 0 || !strings.Contains(out.String(), "syncd checkpoint list|declare|run|activate") {
		t.Fatalf("--help = %d\n%s", code, out.String())
	}
	if code := run([]string{"checkpoint"}, nil, nil, &out, &errOut); code != 2 {
		t.Fatalf("no subcommand = %d", code)
	}
}

// TestProgressPrinter: plain lines off a terminal; on one, a redrawn line
// with a bar that fills when the checkpoint activates.
func TestProgressPrinter(t *testing.T) {
	steps := []checkpoint.Progress{
		{Partition: "p", Name: "n", Phase: checkpoint.PhaseScan, Watermark: 3, ObservedRows: 10, Batches: 1, RowsWritten: 4},
		{Partition: "p", Name: "n", Phase: checkpoint.PhaseActivated, Watermark: 9, ObservedRows: 12, Batches: 2, RowsWritten: 6},
	}
	var plain bytes.Buffer
	p := newProgressPrinter(&plain)
	for _, s := range steps {
		p.print(s)
	}
	p.finish()
	if want := "p/n scan: epoch 0, watermark 3, observed 10 rows, 1 batches, 4 rows written\np/n activated: epoch 0, watermark 9, observed 12 rows, 2 batches, 6 rows written\n"; plain.String() != want {
		t.Fatalf("plain:\n%q\nwant\n%q", plain.String(), want)
	}
	var term bytes.Buffer
	p = &progressPrinter{w: &term, tty: true}
	for _, s := range steps {
		p.print(s)
	}
	p.finish()
	out := term.String()
	if strings.Count(out, "\r\x1b[2K[") != 2 || !strings.Contains(out, "["+strings.Repeat("#", barWidth)+"] p/n activated") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("terminal output %q", out)
	}
}

package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// The retention scheduler runs inside the server graph (StorageModule on
// SQLite), prunes to the §4.6 floors, and stops with the server: no pass
// starts after Stop returned.
func TestRetentionSchedulerInServer(t *testing.T) {
	cfg := testConfig(t)
	cfg.Schema = filepath.Join(t.TempDir(), "schema.ir.json")
	if err := os.WriteFile(cfg.Schema, ssptest.IR(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Retention.PruneInterval = 20 * time.Millisecond
	var st ports.Storage
	var ready *platform.Readiness
	var m *platform.Metrics
	a := fxtest.New(t, app.Options(cfg, platform.ReadBuildInfo("test"), zaptest.NewLogger(t), wiring.StorageModule, fx.Populate(&st, &ready, &m)))
	a.RequireStart()
	waitPhase(t, ready, platform.PhaseReady)
	ctx := context.Background()
	if _, err := st.TouchPartition(ctx, "p", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	err := st.Push(ctx, "p", ports.PushOptions{WriterVersion: ready.Schema().Version}, func(tx ports.PushTx) error {
		for i := range 1500 {
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
	// No active client and nothing older than the force age: the newest
	// 1000 commits stay.
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := st.LogBounds(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		if b.HorizonSeq == 500 {
			break
		}
		if b.HorizonSeq > 500 || time.Now().After(deadline) {
			t.Fatalf("horizon %d, want 500", b.HorizonSeq)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.RequireStop()
	n := prunePasses(t, m)
	time.Sleep(100 * time.Millisecond)
	if after := prunePasses(t, m); after != n || n < 1 {
		t.Fatalf("%v passes, then %v after stop", n, after)
	}
}

// prunePasses is syncd_prune_passes_total{result="ok"}.
func prunePasses(t *testing.T, m *platform.Metrics) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "syncd_prune_passes_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == "ok" {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

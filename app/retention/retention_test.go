package retention_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/retention"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

const day = 24 * time.Hour

func TestTarget(t *testing.T) {
	cases := []struct {
		name                    string
		max, keep, floor, force int64
		hasFloor                bool
		want                    int64
	}{
		{"keep the newest", 1500, 1000, 0, 0, false, 500},
		{"short log", 800, 1000, 0, 0, false, 0},
		{"active floor holds", 5000, 1000, 1200, 0, true, 1200},
		{"floor above the keep cap", 5000, 1000, 4800, 0, true, 4000},
		{"force past a laggard", 5000, 1000, 100, 3000, true, 3000},
		{"force never past the keep cap", 5000, 1000, 100, 4900, true, 4000},
		{"force below the floor changes nothing", 5000, 1000, 2000, 1500, true, 2000},
	}
	for _, c := range cases {
		if got := retention.Target(c.max, c.keep, c.floor, c.hasFloor, c.force); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestPolicyFloors(t *testing.T) {
	p := retention.Policy{ActiveWindow: time.Hour, ForceAge: day, KeepCommits: 10}.Normalize()
	if p != retention.DefaultPolicy() {
		t.Fatalf("%+v", p)
	}
}

type env struct {
	st    *memory.Store
	epoch string
	now   time.Time
}

func newEnv(t *testing.T) *env {
	e := &env{st: memory.New(), now: time.UnixMilli(1_800_000_000_000)}
	ctx := context.Background()
	if err := e.st.EnsureSchema(ctx, ssptest.Schema(t), nil); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.epoch, err = e.st.TouchPartition(ctx, "p", 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// commits appends n empty-ish commits created at at.
func (e *env) commits(t *testing.T, n int, at time.Time) {
	ctx := context.Background()
	err := e.st.Push(ctx, "p", ports.PushOptions{WriterVersion: 2}, func(tx ports.PushTx) error {
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("r%d-%d", at.UnixMilli(), i)
			if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: at.UnixMilli(), ActorID: "a", ClientID: "c", ClientCommitID: id,
				Changes: []commit.Change{{Table: "projects", RowID: id, Op: commit.OpDelete, Scopes: map[string]string{"owner": "o"}}}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) client(t *testing.T, id string, cursor int64, seen time.Time) {
	if err := e.st.PutClient(context.Background(), ports.ClientRecord{Partition: "p", ClientID: id, ActorID: "a", WireVersion: 3, Cursor: cursor, UpdatedAtMs: seen.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) pruner(t *testing.T) *retention.Pruner {
	p, err := retention.New(retention.Options{Store: e.st, Policy: retention.DefaultPolicy(), Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrunePartitionFloors(t *testing.T) {
	e := newEnv(t)
	old := e.now.Add(-40 * day)
	e.commits(t, 300, old)              // seqs 1..300, older than the force age
	e.commits(t, 2000, e.now.Add(-day)) // seqs 301..2300
	e.client(t, "active", 100, e.now.Add(-day))
	e.client(t, "gone", 5, e.now.Add(-20*day)) // outside the active window
	p := e.pruner(t)
	ctx := context.Background()
	r, err := p.PrunePartition(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	// The active client holds the horizon at 100, but commits older than
	// 30 days go regardless: through 300.
	// The slowest active client (at 100) is 2,200 commits behind; the gone
	// one does not count.
	if r.HorizonSeq != 300 || r.RemovedCommits != 300 || r.Lag != 2200 {
		t.Fatalf("%+v", r)
	}
	// The client catches up: the horizon follows, keeping the newest 1000.
	e.client(t, "active", 2300, e.now)
	if r, err = p.PrunePartition(ctx, "p"); err != nil || r.HorizonSeq != 1300 || r.Lag != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	if b, _ := e.st.LogBounds(ctx, "p"); b.HorizonSeq != 1300 || b.MaxSeq != 2300 {
		t.Fatalf("bounds %+v", b)
	}
	// Unregistered partitions are skipped; PruneAll covers the registry.
	if r, err = p.PrunePartition(ctx, "nope"); err != nil || !r.Skipped {
		t.Fatalf("%+v %v", r, err)
	}
	all, err := p.PruneAll(ctx)
	if err != nil || len(all) != 1 || all[0].HorizonSeq != 1300 {
		t.Fatalf("%+v %v", all, err)
	}
}

// TestPass: the scheduled pass prunes every partition and counts itself.
func TestPass(t *testing.T) {
	e := newEnv(t)
	e.commits(t, 1500, e.now)
	reg := prometheus.NewRegistry()
	m, err := retention.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := retention.New(retention.Options{Store: e.st, Policy: retention.DefaultPolicy(), Metrics: m, Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, _ := e.st.LogBounds(context.Background(), "p"); b.HorizonSeq != 500 {
		t.Fatalf("horizon %d after a pass, want 500", b.HorizonSeq)
	}
	if got := gathered(t, reg, "syncd_prune_passes_total"); got != 1 {
		t.Fatalf("%v ok passes counted, want 1", got)
	}
	if got := gathered(t, reg, "syncd_pruned_commits_total"); got != 500 {
		t.Fatalf("%v pruned commits counted, want 500", got)
	}
}

// gathered is the sum of the counter name's series in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestToActiveFloors: the tests' policy prunes exactly down to the floor of
// the clients seen within its window, keeps no newest commits, never
// force-prunes a laggard inside the window, and prunes everything once no
// client is active.
func TestToActiveFloors(t *testing.T) {
	e := newEnv(t)
	e.commits(t, 50, e.now.Add(-40*day)) // seqs 1..50, far past the normative force age
	e.commits(t, 50, e.now.Add(-time.Minute))
	e.client(t, "active", 20, e.now.Add(-time.Minute))
	e.client(t, "gone", 3, e.now.Add(-20*time.Minute)) // outside the 10-minute window
	p, err := retention.New(retention.Options{Store: e.st, Policy: retention.ToActiveFloors(10 * time.Minute), Unfloored: true,
		Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, step := range []struct {
		name     string
		seen     func()
		wantSeq  int64
		wantLoss int64
	}{
		{"the active client's cursor is the floor, the age of older commits aside", func() {}, 20, 20},
		{"the client moves on: the horizon follows to its cursor", func() { e.client(t, "active", 90, e.now) }, 90, 70},
		{"no client active: the whole log goes", func() { e.now = e.now.Add(time.Hour) }, 100, 10},
	} {
		step.seen()
		r, err := p.PrunePartition(ctx, "p")
		if err != nil || r.HorizonSeq != step.wantSeq || r.RemovedCommits != step.wantLoss {
			t.Fatalf("%s: %+v %v, want horizon %d after removing %d", step.name, r, err, step.wantSeq, step.wantLoss)
		}
	}
	// Without Unfloored the same policy is raised to the normative floors.
	floored, err := retention.New(retention.Options{Store: e.st, Policy: retention.ToActiveFloors(time.Minute), Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	e.commits(t, 10, e.now)
	if r, err := floored.PrunePartition(ctx, "p"); err != nil || r.HorizonSeq != 100 {
		t.Fatalf("floored %+v %v", r, err)
	}
}

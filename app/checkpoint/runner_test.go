package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app/checkpoint"
	"github.com/syncd-dev/syncd/app/push"
	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

const part = "p1"

// engines are the stores every case runs on.
var engines = []struct {
	name string
	open func(t *testing.T) ports.Storage
}{
	{"memory", func(t *testing.T) ports.Storage { return memory.New() }},
	{"sqlite", func(t *testing.T) ports.Storage {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "syncd.db")})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
	{"postgres", func(t *testing.T) ports.Storage {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: pgtest.DSN(t), MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

type fixture struct {
	t     *testing.T
	ctx   context.Context
	st    ports.Storage
	sch   *schema.Schema
	svc   *push.Pipeline
	clk   ports.Clock
	tasks *schema.Table
}

func newFixture(t *testing.T, open func(t *testing.T) ports.Storage) *fixture {
	t.Helper()
	ctx := context.Background()
	st := open(t)
	t.Cleanup(func() { _ = st.Close() })
	sch := ssptest.Schema(t)
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	clk := clock.Wall{}
	svc, err := push.New(push.Options{Schema: func() *schema.Schema { return sch }, Store: st, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TouchPartition(ctx, part, clk.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, st: st, sch: sch, svc: svc, clk: clk, tasks: sch.Table("tasks")}
}

func (f *fixture) runner(o checkpoint.Options) *checkpoint.Runner {
	f.t.Helper()
	o.Store, o.Commits, o.Schema, o.Clock = f.st.(checkpoint.Store), f.svc, f.sch, f.clk
	r, err := checkpoint.New(o)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// seedTask writes a task as another writer would (estimate nil: NULL).
func (f *fixture) seedTask(id string, estimate *int64) {
	f.t.Helper()
	c := ssptest.Cols{"id": rowcodec.String(id), "project_id": rowcodec.String("alpha"),
		"title": rowcodec.String("t " + id), "done": rowcodec.Bool(false), "attachment": rowcodec.Null()}
	if estimate != nil {
		c["estimate"] = rowcodec.Int(*estimate)
	} else {
		c["estimate"] = rowcodec.Null()
	}
	if _, err := f.svc.ApplyServerCommit(f.ctx, push.ServerCommit{Partition: part, ActorID: "writer", ClientID: "writer-client",
		ClientCommitID: "seed-" + id + fmt.Sprint(time.Now().UnixNano()),
		Operations:     []ssp2.PushOperation{ssptest.Upsert("tasks", id, ssptest.Sparse(f.t, f.tasks, c), 0)}}); err != nil {
		f.t.Fatalf("seed %s: %v", id, err)
	}
}

// estimates reads every task's estimate ("-" for NULL).
func (f *fixture) estimates() map[string]string {
	f.t.Helper()
	rows, err := f.st.(ports.TableScanner).ScanTable(f.ctx, part, ports.TableScan{Table: "tasks", Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		v := ssptest.DecodeRow(f.t, f.tasks, r.Payload)["estimate"]
		if v.IsNull() {
			out[r.RowID] = "-"
		} else {
			out[r.RowID] = fmt.Sprint(v.Int())
		}
	}
	return out
}

// ownWrites counts, per row id, the backfill's writes in the log.
func (f *fixture) ownWrites(name string) map[string]int {
	f.t.Helper()
	b, err := f.st.LogBounds(f.ctx, part)
	if err != nil {
		f.t.Fatal(err)
	}
	span, err := f.st.ReadCommitRange(f.ctx, part, ports.CommitRange{AfterSeq: b.HorizonSeq, ThroughSeq: b.MaxSeq, LimitChanges: 1 << 20})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range span.Commits {
		if c.ClientID == checkpoint.OwnClientID(name) {
			for _, ch := range c.Changes {
				out[ch.RowID]++
			}
		}
	}
	return out
}

func (f *fixture) fill() *checkpoint.Fill {
	f.t.Helper()
	fl, err := checkpoint.NewFill(f.sch, "tasks", map[string]string{"estimate": "0"})
	if err != nil {
		f.t.Fatal(err)
	}
	return fl
}

func (f *fixture) declare(r *checkpoint.Runner, name string) {
	f.t.Helper()
	if _, err := r.Declare(f.ctx, part, name); err != nil {
		f.t.Fatal(err)
	}
}

func i64(v int64) *int64 { return &v }

func forEngines(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newFixture(t, e.open))
		})
	}
}

// hooked wraps a Backfiller: before runs before each Scan call.
type hooked struct {
	ports.Backfiller
	mu      sync.Mutex
	cursors []string
	before  func(call int) error
}

func (h *hooked) Scan(ctx context.Context, in ports.BackfillScan) (ports.BackfillBatch, error) {
	h.mu.Lock()
	h.cursors = append(h.cursors, in.Cursor)
	n := len(h.cursors)
	h.mu.Unlock()
	if h.before != nil {
		if err := h.before(n); err != nil {
			return ports.BackfillBatch{}, err
		}
	}
	return h.Backfiller.Scan(ctx, in)
}

func TestRunFillsEveryNullRowAndActivates(t *testing.T) {
	forEngines(t, func(t *testing.T, f *fixture) {
		for i := range 7 {
			var est *int64
			if i%3 == 0 {
				est = i64(int64(10 + i))
			}
			f.seedTask(fmt.Sprintf("t%d", i), est)
		}
		var phases []checkpoint.Phase
		var last checkpoint.Progress
		r := f.runner(checkpoint.Options{BatchRows: 3, OnProgress: func(p checkpoint.Progress) { phases, last = append(phases, p.Phase), p }})
		f.declare(r, "estimates")
		res, err := r.Run(f.ctx, part, "estimates", f.fill())
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != checkpoint.OutcomeActivated || res.Checkpoint.State != cpdomain.StateActivated {
			t.Fatalf("result = %+v", res)
		}
		want := map[string]string{"t0": "10", "t1": "0", "t2": "0", "t3": "13", "t4": "0", "t5": "0", "t6": "16"}
		if got := f.estimates(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("estimates = %v, want %v", got, want)
		}
		if got := f.ownWrites("estimates"); fmt.Sprint(got) != "map[t1:1 t2:1 t4:1 t5:1]" {
			t.Fatalf("backfill writes = %v", got)
		}
		cp, _, err := r.Get(f.ctx, part, "estimates")
		if err != nil || cp.State != cpdomain.StateActivated || cp.ObservedRows != 7 || !checkpoint.PassComplete(cp) {
			t.Fatalf("stored = %+v, %v", cp, err)
		}
		if phases[0] != checkpoint.PhaseClaimed || phases[len(phases)-1] != checkpoint.PhaseActivated {
			t.Fatalf("phases = %v", phases)
		}
		b, _ := f.st.LogBounds(f.ctx, part)
		if last.Checkpoint.State != cpdomain.StateActivated || last.Checkpoint.Watermark != last.Watermark || last.TargetSeq == 0 || last.TargetSeq > b.MaxSeq {
			t.Fatalf("last progress = %+v (log %+v)", last, b)
		}
		// Activated is terminal: another run cannot claim it.
		_, err = r.Run(f.ctx, part, "estimates", f.fill())
		if syncerr.CodeOf(err) != syncerr.StorageCheckpointNotDeclared {
			t.Fatalf("run after activation = %v", err)
		}
	})
}

func TestRunResumesAfterACrashFromTheStoredCursor(t *testing.T) {
	forEngines(t, func(t *testing.T, f *fixture) {
		for i := range 8 {
			f.seedTask(fmt.Sprintf("t%d", i), nil)
		}
		crash := errors.New("process killed")
		first := &hooked{Backfiller: f.fill(), before: func(call int) error {
			if call == 3 {
				return crash
			}
			return nil
		}}
		r := f.runner(checkpoint.Options{BatchRows: 3})
		f.declare(r, "estimates")
		if _, err := r.Run(f.ctx, part, "estimates", first); !errors.Is(err, crash) {
			t.Fatalf("first run = %v", err)
		}
		cp, _, _ := r.Get(f.ctx, part, "estimates")
		if cp.State != cpdomain.StateBackfilling || cp.Cursor != "scan:t5" || cp.ObservedRows != 6 {
			t.Fatalf("after the crash = %+v", cp)
		}
		// A new process resumes where the stored cursor points.
		second := &hooked{Backfiller: f.fill()}
		res, err := f.runner(checkpoint.Options{BatchRows: 3}).Run(f.ctx, part, "estimates", second)
		if err != nil || res.Outcome != checkpoint.OutcomeActivated {
			t.Fatalf("second run = %+v, %v", res, err)
		}
		if second.cursors[0] != "t5" {
			t.Fatalf("resumed at %q, want after t5", second.cursors[0])
		}
		for id, n := range f.ownWrites("estimates") {
			if n != 1 {
				t.Fatalf("row %s written %d times", id, n)
			}
		}
		for id, v := range f.estimates() {
			if v != "0" {
				t.Fatalf("row %s = %s after resume", id, v)
			}
		}
		if res.Checkpoint.ObservedRows != 8 {
			t.Fatalf("observed rows = %d", res.Checkpoint.ObservedRows)
		}
	})
}

func TestASecondClaimFencesTheFirstRunner(t *testing.T) {
	forEngines(t, func(t *testing.T, f *fixture) {
		for i := range 9 {
			f.seedTask(fmt.Sprintf("t%d", i), nil)
		}
		r := f.runner(checkpoint.Options{BatchRows: 3})
		f.declare(r, "estimates")
		// While the first runner derives its second batch, another node
		// claims the checkpoint.
		first := &hooked{Backfiller: f.fill(), before: func(call int) error {
			if call == 2 {
				_, err := f.st.ClaimCheckpoint(f.ctx, cpdomain.Declaration{Partition: part, Name: "estimates", SchemaVersion: f.sch.Version}, 1)
				return err
			}
			return nil
		}}
		res, err := r.Run(f.ctx, part, "estimates", first)
		if err != nil || res.Outcome != checkpoint.OutcomeSuperseded || res.Batches != 1 {
			t.Fatalf("first run = %+v, %v", res, err)
		}
		// Only its first batch landed: the second rolled back with its advance.
		if got := f.ownWrites("estimates"); len(got) != 3 {
			t.Fatalf("after the superseded run: %v", got)
		}
		res, err = r.Run(f.ctx, part, "estimates", f.fill())
		if err != nil || res.Outcome != checkpoint.OutcomeActivated || res.Checkpoint.OwnerEpoch != 3 {
			t.Fatalf("next run = %+v, %v", res, err)
		}
		if got := f.ownWrites("estimates"); len(got) != 9 {
			t.Fatalf("rows written = %v", got)
		}
	})
}

func TestRacingRunnersLeaveOneActivation(t *testing.T) {
	forEngines(t, func(t *testing.T, f *fixture) {
		for i := range 12 {
			f.seedTask(fmt.Sprintf("t%02d", i), nil)
		}
		f.declare(f.runner(checkpoint.Options{}), "estimates")
		var wg sync.WaitGroup
		results := make([]checkpoint.Result, 2)
		errs := make([]error, 2)
		for i := range results {
			wg.Go(func() {
				results[i], errs[i] = f.runner(checkpoint.Options{BatchRows: 2}).Run(f.ctx, part, "estimates", f.fill())
			})
		}
		wg.Wait()
		activated := 0
		for i := range results {
			switch {
			case errs[i] == nil && results[i].Outcome == checkpoint.OutcomeActivated:
				activated++
			case errs[i] == nil && results[i].Outcome == checkpoint.OutcomeSuperseded:
			case syncerr.CodeOf(errs[i]) == syncerr.StorageCheckpointNotDeclared:
				// Claimed after the other activated.
			default:
				t.Fatalf("runner %d = %+v, %v", i, results[i], errs[i])
			}
		}
		if activated != 1 {
			t.Fatalf("%d runners activated: %+v %v", activated, results, errs)
		}
		for id, v := range f.estimates() {
			if v != "0" {
				t.Fatalf("row %s = %s", id, v)
			}
		}
	})
}

func TestStaleActivationCatchesUp(t *testing.T) {
	forEngines(t, func(t *testing.T, f *fixture) {
		for i := range 4 {
			f.seedTask(fmt.Sprintf("t%d", i), nil)
		}
		var acts []cpdomain.Activation
		var once sync.Once
		var r *checkpoint.Runner
		r = f.runner(checkpoint.Options{BatchRows: 3, OnProgress: func(p checkpoint.Progress) {
			switch p.Phase {
			case checkpoint.PhaseCatchUp, checkpoint.PhaseScan:
				if p.Phase == checkpoint.PhaseScan && !hasDone(f, r) {
					return
				}
				// A client writes a row with no estimate after the
				// catch-up read, before the activation.
				once.Do(func() { f.seedTask("late", nil) })
			case checkpoint.PhaseActivation:
				acts = append(acts, p.Activation)
			}
		}})
		f.declare(r, "estimates")
		res, err := r.Run(f.ctx, part, "estimates", f.fill())
		if err != nil || res.Outcome != checkpoint.OutcomeActivated {
			t.Fatalf("run = %+v, %v", res, err)
		}
		if len(acts) < 2 || acts[0] != cpdomain.Stale || acts[len(acts)-1] != cpdomain.Activated {
			t.Fatalf("activations = %v", acts)
		}
		if got := f.estimates()["late"]; got != "0" {
			t.Fatalf("late row = %s: the catch-up missed it", got)
		}
		if res.CaughtUpRows < 1 {
			t.Fatalf("caught up %d rows", res.CaughtUpRows)
		}
	})
}

func hasDone(f *fixture, r *checkpoint.Runner) bool {
	cp, _, _ := r.Get(f.ctx, part, "estimates")
	return checkpoint.PassComplete(cp)
}

func TestUnverifiableActivationRestartsThePass(t *testing.T) {
	forEngines(t, func(t *testing.T, f *fixture) {
		for i := range 4 {
			f.seedTask(fmt.Sprintf("t%d", i), nil)
		}
		var once sync.Once
		var r *checkpoint.Runner
		r = f.runner(checkpoint.Options{BatchRows: 10, OnProgress: func(p checkpoint.Progress) {
			if p.Phase != checkpoint.PhaseScan || !hasDone(f, r) {
				return
			}
			// After the pass, a client writes and the log is pruned past
			// the watermark: the changes since can no longer be read.
			once.Do(func() {
				f.seedTask("late", nil)
				epoch, _, err := f.st.LogEpoch(f.ctx, part)
				if err != nil {
					t.Error(err)
				}
				b, _ := f.st.LogBounds(f.ctx, part)
				if _, err := f.st.PruneCommitsThrough(f.ctx, part, ports.PruneRequest{LogEpoch: epoch, ThroughSeq: b.MaxSeq}); err != nil {
					t.Error(err)
				}
			})
		}})
		f.declare(r, "estimates")
		res, err := r.Run(f.ctx, part, "estimates", f.fill())
		if err != nil || res.Outcome != checkpoint.OutcomeActivated || res.FullPasses != 2 {
			t.Fatalf("run = %+v, %v", res, err)
		}
		if got := f.estimates()["late"]; got != "0" {
			t.Fatalf("late row = %s: the restarted pass missed it", got)
		}
	})
}

func TestActivateNeedsACompletePass(t *testing.T) {
	forEngines(t, func(t *testing.T, f *fixture) {
		f.seedTask("t0", nil)
		r := f.runner(checkpoint.Options{})
		_, err := r.Activate(f.ctx, part, "estimates", []string{"tasks"})
		if syncerr.CodeOf(err) != syncerr.StorageCheckpointNotDeclared {
			t.Fatalf("activate undeclared = %v", err)
		}
		f.declare(r, "estimates")
		_, err = r.Activate(f.ctx, part, "estimates", []string{"tasks"})
		if syncerr.CodeOf(err) != syncerr.BackfillIncomplete {
			t.Fatalf("activate before the pass = %v", err)
		}
	})
}

func TestRunRefusesWithoutABackfill(t *testing.T) {
	f := newFixture(t, engines[0].open)
	r := f.runner(checkpoint.Options{})
	f.declare(r, "estimates")
	if _, err := r.Run(f.ctx, part, "estimates", nil); syncerr.CodeOf(err) != syncerr.BackfillUnregistered {
		t.Fatalf("run without a backfill = %v", err)
	}
}

func TestNewFillRefusesWhatItCannotFill(t *testing.T) {
	sch := ssptest.Schema(t)
	for _, tt := range []struct {
		name, table string
		set         map[string]string
	}{
		{"unknown table", "nope", map[string]string{"estimate": "1"}},
		{"nothing to set", "tasks", nil},
		{"unknown column", "tasks", map[string]string{"nope": "1"}},
		{"primary key", "tasks", map[string]string{"id": `"x"`}},
		{"scope column", "tasks", map[string]string{"project_id": `"x"`}},
		{"wrong type", "tasks", map[string]string{"estimate": `"one"`}},
		{"not JSON", "tasks", map[string]string{"estimate": `one`}},
		{"null", "tasks", map[string]string{"estimate": `null`}},
		{"blob_ref column", "tasks", map[string]string{"attachment": `"x"`}},
		{"crdt column", "notes", map[string]string{"doc": `"x"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := checkpoint.NewFill(sch, tt.table, tt.set); syncerr.CodeOf(err) != syncerr.BackfillInvalidSpec {
				t.Fatalf("NewFill = %v", err)
			}
		})
	}
	if _, err := checkpoint.NewFill(sch, "notes", map[string]string{"count": "3", "title": `"untitled"`, "meta": `{"a":1}`}); err != nil {
		t.Fatalf("valid fill refused: %v", err)
	}
}

// conflicting writes a client's estimate into a row right after the
// first batch was derived, before it commits.
type conflicting struct {
	*checkpoint.Fill
	f     *fixture
	calls int
}

func (c *conflicting) Scan(ctx context.Context, in ports.BackfillScan) (ports.BackfillBatch, error) {
	b, err := c.Fill.Scan(ctx, in)
	if c.calls++; c.calls == 1 && err == nil {
		op := ssptest.Upsert("tasks", "t1", ssptest.Sparse(c.f.t, c.f.tasks, ssptest.Cols{"id": rowcodec.String("t1"), "estimate": rowcodec.Int(7)}), -1)
		if _, err := c.f.svc.ApplyServerCommit(ctx, push.ServerCommit{Partition: part, ActorID: "writer", ClientID: "writer-client",
			ClientCommitID: "meanwhile", Operations: []ssp2.PushOperation{op}}); err != nil {
			return b, err
		}
	}
	return b, err
}

// TestABatchInConflictIsDerivedAgain: a client's write between a batch's
// derivation and its commit is never overwritten: the batch conflicts
// (its writes carry the rows' versions) and is derived again.
func TestABatchInConflictIsDerivedAgain(t *testing.T) {
	forEngines(t, func(t *testing.T, f *fixture) {
		for i := range 3 {
			f.seedTask(fmt.Sprintf("t%d", i), nil)
		}
		r := f.runner(checkpoint.Options{BatchRows: 10})
		f.declare(r, "estimates")
		c := &conflicting{Fill: f.fill(), f: f}
		res, err := r.Run(f.ctx, part, "estimates", c)
		if err != nil || res.Outcome != checkpoint.OutcomeActivated {
			t.Fatalf("run = %+v, %v", res, err)
		}
		if got := f.estimates(); fmt.Sprint(got) != "map[t0:0 t1:7 t2:0]" {
			t.Fatalf("estimates = %v: the client's write was overwritten", got)
		}
		if c.calls < 2 {
			t.Fatalf("batch derived %d times", c.calls)
		}
	})
}

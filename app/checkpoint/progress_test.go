package checkpoint_test

import (
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/checkpoint"
	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/test/testclock"
)

// recordingSink keeps what is emitted.
type recordingSink struct{ got []event.Event }

func (r *recordingSink) Emit(e event.Event) { r.got = append(r.got, e) }

// TestBackfillProgressIsAnEvent: every step of a runner's backfill
// is a checkpoint.progress event carrying the stored checkpoint and the
// run's target, timed from the run's claim; the host's hook hears it too.
func TestBackfillProgressIsAnEvent(t *testing.T) {
	clk := testclock.New(time.UnixMilli(1_700_000_000_000))
	sink := &recordingSink{}
	var host []checkpoint.Phase
	hook := checkpoint.ProgressHooks(func(p checkpoint.Progress) { host = append(host, p.Phase) }, sink, clk.Now)
	cp := cpdomain.Checkpoint{Partition: "p1", Name: "fill", SchemaVersion: 2, State: cpdomain.StateBackfilling}
	step := func(ph checkpoint.Phase, watermark int64, after time.Duration) {
		clk.Advance(after)
		c := cp
		c.Watermark = watermark
		hook(checkpoint.Progress{Partition: "p1", Name: "fill", Phase: ph, Checkpoint: c, TargetSeq: 40})
	}
	step(checkpoint.PhaseClaimed, 0, time.Second) // the run's clock starts here
	step(checkpoint.PhaseScan, 10, 2*time.Second)
	step(checkpoint.PhaseActivated, 40, 3*time.Second)
	step(checkpoint.PhaseClaimed, 40, time.Minute) // a new run: timed afresh
	want := []struct {
		watermark int64
		elapsed   time.Duration
	}{{0, 0}, {10, 2 * time.Second}, {40, 5 * time.Second}, {40, 0}}
	if len(sink.got) != len(want) || len(host) != len(want) {
		t.Fatalf("%d events, %d host calls; want %d each", len(sink.got), len(host), len(want))
	}
	for i, w := range want {
		e, ok := sink.got[i].(event.CheckpointProgress)
		if !ok {
			t.Fatalf("event %d is %T", i, sink.got[i])
		}
		if e.Partition != "p1" || e.Name != "fill" || e.SchemaVersion != 2 || e.TargetSeq != 40 ||
			e.Watermark != w.watermark || e.Elapsed != w.elapsed {
			t.Fatalf("event %d = %+v; want watermark %d, elapsed %v", i, e, w.watermark, w.elapsed)
		}
	}
	if checkpoint.ProgressHooks(nil, nil, clk.Now) != nil {
		t.Fatal("no host hook and no sink: want no callback")
	}
}

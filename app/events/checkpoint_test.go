package events_test

import (
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/events"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/event"
)

type collect []event.Event

func (c *collect) Emit(e event.Event) { *c = append(*c, e) }

// Each batch a backfill reports is one progress event, timed from the
// reporter's start on the given clock.
func TestCheckpointReporterEmitsEachBatch(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	now := func() time.Time { return at }
	var got collect
	report := events.CheckpointReporter(&got, now)
	cp := checkpoint.Checkpoint{Partition: "p", Name: "projection", SchemaVersion: 4, State: checkpoint.StateBackfilling}
	for i, rows := range []int64{500, 1000} {
		at = at.Add(time.Second)
		cp.Watermark, cp.ObservedRows = int64(10*(i+1)), rows
		report(cp, 40)
	}
	want := []event.CheckpointProgress{
		{Partition: "p", Name: "projection", SchemaVersion: 4, State: "backfilling", Watermark: 10, TargetSeq: 40, ObservedRows: 500, Elapsed: time.Second},
		{Partition: "p", Name: "projection", SchemaVersion: 4, State: "backfilling", Watermark: 20, TargetSeq: 40, ObservedRows: 1000, Elapsed: 2 * time.Second},
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Nothing listening: a callback that does nothing.
	events.CheckpointReporter(nil, now)(cp, 40)
}

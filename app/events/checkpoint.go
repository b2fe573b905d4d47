package events

import (
	"time"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/ports"
)

// CheckpointReporter is the progress callback a backfill runner hands
// its batches to: each call emits the stored checkpoint's progress
// (event.CheckpointProgress) with the source seq the backfill runs
// through (0 when unknown) and the time since the reporter was made, on
// now's clock. A nil sink gives a callback that does nothing.
func CheckpointReporter(sink ports.EventSink, now func() time.Time) func(cp checkpoint.Checkpoint, targetSeq int64) {
	if sink == nil {
		return func(checkpoint.Checkpoint, int64) {}
	}
	if now == nil {
		now = time.Now
	}
	began := now()
	return func(cp checkpoint.Checkpoint, targetSeq int64) {
		sink.Emit(event.CheckpointProgressOf(cp, targetSeq, now().Sub(began)))
	}
}

package ports

import (
	"context"
	"time"

	"github.com/syncd-dev/syncd/domain/event"
)

// EventSink is where the use cases report operational events
// (domain/event). Emit never blocks and never fails: a sink that cannot
// keep up drops the event (and counts it). Use cases hold a nil sink when
// nothing listens and test for it before building an event, so an unused
// catalog costs the request path one comparison.
type EventSink interface {
	Emit(e event.Event)
}

// EventRecord is one emitted event as a hook receives it: the event, the
// app clock's time at emission, and a sequence number in emission order
// (1, 2, …) over the whole process, so a hook can spot a gap left by a
// dropped event.
type EventRecord struct {
	Seq   uint64
	At    time.Time
	Event event.Event
}

// EventHook is a host's receiver of operational events. Hooks run on a
// delivery goroutine of their own, in emission order, never on the
// request path; ctx is canceled when the server stops and its drain bound
// passed. A hook that is slow only loses its own events (its queue is
// bounded); one that panics is recovered and counted.
type EventHook interface {
	HandleEvent(ctx context.Context, r EventRecord)
}

// EventHookFunc adapts a function to EventHook.
type EventHookFunc func(ctx context.Context, r EventRecord)

// HandleEvent implements EventHook.
func (f EventHookFunc) HandleEvent(ctx context.Context, r EventRecord) { f(ctx, r) }

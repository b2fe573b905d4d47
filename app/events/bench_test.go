package events_test

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/app/events"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/ports"
)

// emitApplied is what a use case does at an emission point: test the
// sink, then build and emit the event.
func emitApplied(sink ports.EventSink, seq int64) {
	if sink != nil {
		sink.Emit(event.PushApplied{Who: event.Who{Partition: "p", ActorID: "a", ClientID: "c"},
			ClientCommitID: "cc", CommitSeq: seq, Operations: 1, Changes: 1})
	}
}

// BenchmarkEmit measures one emission point: with nothing listening (the
// use case holds a nil sink), and with one host hook that keeps up or
// one whose queue is full (the event is dropped).
//
//	go test -run '^$' -bench Emit ./app/events
func BenchmarkEmit(b *testing.B) {
	b.Run("no_sink", func(b *testing.B) {
		var sink ports.EventSink
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			emitApplied(sink, int64(i))
		}
	})
	b.Run("one_hook", func(b *testing.B) {
		d := events.New(events.Options{Hooks: []ports.EventHook{ports.EventHookFunc(func(context.Context, ports.EventRecord) {})}})
		d.Start()
		defer func() { _ = d.Stop(context.Background()) }()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			emitApplied(d, int64(i))
		}
	})
	b.Run("full_queue", func(b *testing.B) {
		block := make(chan struct{})
		d := events.New(events.Options{QueueSize: 1, Hooks: []ports.EventHook{ports.EventHookFunc(func(context.Context, ports.EventRecord) { <-block })}})
		d.Start()
		defer func() { close(block); _ = d.Stop(context.Background()) }()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			emitApplied(d, int64(i))
		}
	})
	b.Run("one_hook_parallel", func(b *testing.B) {
		d := events.New(events.Options{Hooks: []ports.EventHook{ports.EventHookFunc(func(context.Context, ports.EventRecord) {})}})
		d.Start()
		defer func() { _ = d.Stop(context.Background()) }()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := int64(0); pb.Next(); i++ {
				emitApplied(d, i)
			}
		})
	})
}

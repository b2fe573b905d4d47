package app_test

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/ports"
)

// eventsGraph assembles EventsModule alone with a logger at level.
func eventsGraph(t *testing.T, level zapcore.Level, sink *ports.EventSink, reg **prometheus.Registry, opts ...fx.Option) *fxtest.App {
	obs, _ := observer.New(level)
	return fxtest.New(t, append([]fx.Option{
		fx.NopLogger,
		fx.Supply(zap.New(obs)),
		fx.Provide(func() ports.Clock { return clock.Wall{} }),
		fx.Provide(func() *platform.Metrics { return &platform.Metrics{Registry: prometheus.NewRegistry()} }),
		wiring.EventsModule,
		fx.Populate(sink),
		fx.Invoke(func(m *platform.Metrics) { *reg = m.Registry }),
	}, opts...)...)
}

// With nothing listening the use cases get a nil sink: no event is
// built on the request path.
func TestEventSinkIsNilWithoutListeners(t *testing.T) {
	var sink ports.EventSink
	var reg *prometheus.Registry
	a := eventsGraph(t, zap.InfoLevel, &sink, &reg)
	a.RequireStart().RequireStop()
	if sink != nil {
		t.Fatalf("sink %T with no hook and the log above debug", sink)
	}
}

// A hook registered with the options API hears what is emitted; the stop
// drains it first, and the dispatcher's counters are on the graph's
// registry.
func TestEventHookRegisteredThroughTheGraph(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  func(h ports.EventHook) fx.Option
	}{
		{"WithEventHook", app.WithEventHook},
		{"ProvideEventHook", func(h ports.EventHook) fx.Option {
			return app.ProvideEventHook(func() ports.EventHook { return h })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got []ports.EventRecord
			)
			h := ports.EventHookFunc(func(_ context.Context, r ports.EventRecord) {
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
			})
			var sink ports.EventSink
			var reg *prometheus.Registry
			a := eventsGraph(t, zap.InfoLevel, &sink, &reg, c.opt(h))
			a.RequireStart()
			if sink == nil {
				t.Fatal("no sink with a hook registered")
			}
			for i := range 100 {
				sink.Emit(event.PushApplied{Who: event.Who{Partition: "p"}, CommitSeq: int64(i + 1)})
			}
			a.RequireStop()
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 100 || got[99].Event.(event.PushApplied).CommitSeq != 100 {
				t.Fatalf("hook heard %d events by the end of the stop", len(got))
			}
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range fams {
				if f.GetName() == "syncd_events_delivered_total" {
					found = f.GetMetric()[0].GetCounter().GetValue() == 100
				}
			}
			if !found {
				t.Fatal("syncd_events_delivered_total is not 100 on the graph's registry")
			}
		})
	}
}

package wiring

import (
	"context"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/events"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/ports"
)

// GroupEventHooks is the value group of the host's event hooks.
const GroupEventHooks = "syncd.event_hooks"

// EventsModule provides the event dispatcher and, when anything listens
// (a host hook, or the log at debug level), the ports.EventSink the use
// cases emit to; with nothing listening the sink is nil and no event is
// built. The dispatcher starts before the use cases that emit and stops
// after them, so their last events are delivered (within the drain bound).
var EventsModule = fx.Module("syncd.events",
	fx.Provide(NewEvents, newEventSink),
)

// EventsParams are the inputs of the event dispatcher.
type EventsParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Log       *zap.Logger
	Clock     ports.Clock
	Metrics   *platform.Metrics `optional:"true"`
	Hooks     []ports.EventHook `group:"syncd.event_hooks"`
}

// NewEvents builds the dispatcher over the host's hooks and the log, with
// its counters on the graph's registry, started and stopped by the
// lifecycle (neither hook blocks past the drain bound).
func NewEvents(p EventsParams) (*events.Dispatcher, error) {
	var m *events.Metrics
	if p.Metrics != nil {
		var err error
		if m, err = events.NewMetrics(p.Metrics.Registry); err != nil {
			return nil, err
		}
	}
	log := p.Log.Named("events")
	d := events.New(events.Options{Hooks: p.Hooks, Log: log, Now: p.Clock.Now, Metrics: m})
	if !d.Active() {
		return d, nil
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			d.Start()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			// A hook that outlasts the drain loses its last events; that
			// never fails the stop.
			if err := d.Stop(ctx); err != nil {
				log.Warn("event delivery cut short at stop", zap.Error(err))
			}
			return nil
		},
	})
	return d, nil
}

// newEventSink is the dispatcher as the use cases' sink; nil when nothing
// listens, so emission points cost one comparison.
func newEventSink(d *events.Dispatcher) ports.EventSink {
	if !d.Active() {
		return nil
	}
	return d
}

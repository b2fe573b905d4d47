package events

import "github.com/prometheus/client_golang/prometheus"

// Metrics count the dispatcher's deliveries per subscriber. A nil
// *Metrics counts nothing.
type Metrics struct {
	delivered, dropped, panics *prometheus.CounterVec
}

// NewMetrics registers the dispatcher's counters on reg (nil: not
// registered, still counted).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "syncd", Name: name, Help: help}, []string{"hook"})
	}
	m := &Metrics{
		delivered: vec("events_delivered_total", "Operational events a subscriber (a host hook, or log) handled."),
		dropped:   vec("events_dropped_total", "Operational events dropped for a subscriber whose queue was full, or emitted after the stop."),
		panics:    vec("events_hook_panics_total", "Event hook calls that panicked (recovered; the event is lost for that hook)."),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.delivered, m.dropped, m.panics} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// counters are one subscriber's children of the vectors, resolved once so
// Emit pays one atomic add per drop.
type counters struct {
	delivered, dropped, panics prometheus.Counter
}

func (m *Metrics) counters(name string) counters {
	if m == nil {
		return counters{noCount{}, noCount{}, noCount{}}
	}
	return counters{m.delivered.WithLabelValues(name), m.dropped.WithLabelValues(name), m.panics.WithLabelValues(name)}
}

// noCount is a counter that counts nothing.
type noCount struct{ prometheus.Counter }

func (noCount) Inc()        {}
func (noCount) Add(float64) {}

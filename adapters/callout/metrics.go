package callout

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count callouts by callback and outcome and time them. A nil
// *Metrics records nothing.
type Metrics struct {
	duration *prometheus.HistogramVec
	outcomes *prometheus.CounterVec
	queries  *prometheus.CounterVec
}

// NewMetrics registers the callout metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "syncd", Name: "callout_duration_seconds",
			Help: "Callouts to the backend (--callout-url), from the wait for a slot to the answer read, by callback.",
			// A validator runs inside a push transaction with a budget of
			// a few hundred milliseconds: the low buckets matter.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .2, .5, 1, 2.5, 5, 10},
		}, []string{"callback"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "syncd", Name: "callouts_total",
			Help: "Callouts to the backend by callback and outcome: ok, refused (the backend said no), queries (a validator asked for query results first), or an outage: timeout, unreachable, bad_status, malformed, too_large; canceled when the request went away first.",
		}, []string{"callback", "outcome"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "syncd", Name: "callout_queries_total",
			Help: "Queries a validate callout asked for, run in the push transaction, by callback and result: rows, or the operation.* code the backend was given instead.",
		}, []string{"callback", "result"}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.outcomes, m.queries} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(callback string, o Outcome, d time.Duration) {
	if m == nil {
		return
	}
	m.duration.WithLabelValues(callback).Observe(d.Seconds())
	m.outcomes.WithLabelValues(callback, string(o)).Inc()
}

// query counts one query a validate callout asked for: result is "rows"
// or the code it failed with.
func (m *Metrics) query(callback, result string) {
	if m == nil {
		return
	}
	m.queries.WithLabelValues(callback, result).Inc()
}

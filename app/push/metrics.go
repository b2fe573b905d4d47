package push

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Metrics count push commits by outcome and operations applied. A nil
// *Metrics records nothing.
type Metrics struct {
	commits    *prometheus.CounterVec
	operations prometheus.Counter
}

// NewMetrics registers the push counters on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "syncd", Name: "push_commits_total",
			Help: "Push commits answered, by outcome (applied, cached, conflict, rejected, cache_miss).",
		}, []string{"outcome"}),
		operations: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "syncd", Name: "push_operations_applied_total",
			Help: "Client operations of newly applied commits.",
		}),
	}
	for _, c := range []prometheus.Collector{m.commits, m.operations} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe counts one commit's answer, of ops client operations.
func (m *Metrics) observe(o outcome, ops int) {
	if m == nil {
		return
	}
	label := outcomeLabel(o)
	m.commits.WithLabelValues(label).Inc()
	if label == "applied" {
		m.operations.Add(float64(ops))
	}
}

// outcomeLabel is applied, cached, conflict, rejected or cache_miss.
func outcomeLabel(o outcome) string {
	switch o.result.Status {
	case ssp2.PushApplied:
		return "applied"
	case ssp2.PushCached:
		return "cached"
	}
	if len(o.result.Results) > 0 {
		r := o.result.Results[0]
		switch {
		case r.Status == ssp2.OpConflict:
			return "conflict"
		case r.Code == string(syncerr.IdempotencyCacheMiss):
			return "cache_miss"
		}
	}
	return "rejected"
}

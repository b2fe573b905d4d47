package wiring

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/syncsvc"
)

// pushMetrics counts push commits by outcome and operations applied.
type pushMetrics struct {
	commits    *prometheus.CounterVec
	operations prometheus.Counter
}

func newPushMetrics(m *platform.Metrics) (*pushMetrics, error) {
	p := &pushMetrics{
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "syncd", Name: "push_commits_total",
			Help: "Push commits answered, by outcome (applied, cached, conflict, rejected, cache_miss).",
		}, []string{"outcome"}),
		operations: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "syncd", Name: "push_operations_applied_total",
			Help: "Client operations of newly applied commits.",
		}),
	}
	if m == nil || m.Registry == nil {
		return p, nil
	}
	for _, c := range []prometheus.Collector{p.commits, p.operations} {
		if err := m.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pushMetrics) observe(o syncsvc.CommitObservation) {
	p.commits.WithLabelValues(o.Outcome).Inc()
	if o.Outcome == "applied" {
		p.operations.Add(float64(o.Operations))
	}
}

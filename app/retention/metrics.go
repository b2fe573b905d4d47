package retention

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts the scheduled prune passes.
type Metrics struct {
	passes  *prometheus.CounterVec
	removed prometheus.Counter
	lag     prometheus.Gauge
}

// NewMetrics registers the retention metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_prune_passes_total",
			Help: "Scheduled commit-log prune passes, by result (ok, error).",
		}, []string{"result"}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_pruned_commits_total",
			Help: "Commits removed by scheduled prune passes.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "syncd_commit_log_lag_commits",
			Help: "At the last prune pass, the most commits any partition's slowest active client was behind its newest commit.",
		}),
	}
	for _, c := range []prometheus.Collector{m.passes, m.removed, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe counts one pass (a nil m counts nothing).
func (m *Metrics) observe(res []PartitionResult, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.passes.WithLabelValues(result).Inc()
	most := int64(0)
	for _, r := range res {
		m.removed.Add(float64(r.RemovedCommits))
		most = max(most, r.Lag)
	}
	if err == nil {
		m.lag.Set(float64(most))
	}
}

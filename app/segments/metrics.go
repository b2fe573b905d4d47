package segments

import "github.com/prometheus/client_golang/prometheus"

// SweepMetrics counts the segments the sweep deleted.
type SweepMetrics struct{ removed prometheus.Counter }

// NewSweepMetrics registers the sweep's counter on reg.
func NewSweepMetrics(reg prometheus.Registerer) (*SweepMetrics, error) {
	m := &SweepMetrics{removed: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "syncd_segments_swept_total",
		Help: "Stored segments deleted after every publication of theirs expired.",
	})}
	if err := reg.Register(m.removed); err != nil {
		return nil, err
	}
	return m, nil
}

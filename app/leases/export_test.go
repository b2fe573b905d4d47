package leases

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// OutageRounds is the outage-round count of one outcome.
func OutageRounds(m *Metrics, outcome string) float64 {
	return value(m.outageN.WithLabelValues(outcome))
}

// SealFailures is the seal-failure count.
func SealFailures(m *Metrics) float64 { return value(m.sealN) }

// Issued is the count of leases written, by kind.
func Issued(m *Metrics, kind string) float64 { return value(m.issuedN.WithLabelValues(kind)) }

func value(c prometheus.Counter) float64 {
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		return -1
	}
	return out.GetCounter().GetValue()
}

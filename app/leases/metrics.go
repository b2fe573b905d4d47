package leases

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the auth-lease counters. A nil *Metrics records nothing.
type Metrics struct {
	issuedN  *prometheus.CounterVec
	outageN  *prometheus.CounterVec
	revokedN prometheus.Counter
	sealN    prometheus.Counter
}

// NewMetrics registers the auth-lease counters on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		issuedN: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_auth_leases_issued_total",
			Help: "Auth leases answered by live-resolved rounds, by kind: issued (a fresh id), refreshed (the same id slid), kept (issued within --auth-lease-refresh with the same grant: answered as stored, not rewritten).",
		}, []string{"kind"}),
		outageN: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_auth_lease_outage_rounds_total",
			Help: "Rounds whose scope resolver reported an outage, by outcome: served (from the lease), no_lease, other_actor, expired, revoked.",
		}, []string{"outcome"}),
		revokedN: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_auth_lease_revocations_total",
			Help: "Auth lease revocations.",
		}),
		sealN: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_auth_lease_seal_failures_total",
			Help: "Stored auth leases whose seal no configured key made (treated as absent).",
		}),
	}
	for _, c := range []prometheus.Collector{m.issuedN, m.outageN, m.revokedN, m.sealN} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every label value exists from the start, so a rate() sees its first
	// increment.
	for _, k := range []string{"issued", "refreshed", "kept"} {
		m.issuedN.WithLabelValues(k)
	}
	for _, k := range []string{"served", "no_lease", "other_actor", "expired", "revoked"} {
		m.outageN.WithLabelValues(k)
	}
	return m, nil
}

func (m *Metrics) issued(fresh bool) {
	if m == nil {
		return
	}
	kind := "refreshed"
	if fresh {
		kind = "issued"
	}
	m.issuedN.WithLabelValues(kind).Inc()
}

func (m *Metrics) kept() {
	if m != nil {
		m.issuedN.WithLabelValues("kept").Inc()
	}
}

func (m *Metrics) outage(outcome string) {
	if m != nil {
		m.outageN.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) revoked() {
	if m != nil {
		m.revokedN.Inc()
	}
}

func (m *Metrics) sealFailure() {
	if m != nil {
		m.sealN.Inc()
	}
}

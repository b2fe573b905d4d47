package app

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/syncd-dev/syncd/adapters/httpapi"
)

// Metrics is the server's own Prometheus registry (never the global one)
// and the collectors this package feeds.
type Metrics struct {
	Registry *prometheus.Registry

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	phase    *prometheus.GaugeVec
}

// NewMetrics registers the Go runtime, process, build and readiness
// collectors and the sync API request metrics.
func NewMetrics(info BuildInfo, r *Readiness) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_http_requests_total",
			Help: "Sync API requests answered, by route and status.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "syncd_http_request_duration_seconds",
			Help:    "Sync API request duration, by route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "syncd_readiness_phase",
			Help: "1 for the current readiness phase, 0 for the others.",
		}, []string{"phase"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "syncd_build_info",
		Help: "Build information; always 1.",
	}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(info.Version, info.Commit, info.GoVersion).Set(1)
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "syncd_ready",
		Help: "1 when the sync API serves requests, 0 otherwise.",
	}, func() float64 {
		if r.Ready() {
			return 1
		}
		return 0
	})
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		build, ready, m.requests, m.duration, m.phase,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	r.OnChange(func(p Phase) {
		for _, q := range Phases() {
			v := 0.0
			if q == p {
				v = 1
			}
			m.phase.WithLabelValues(string(q)).Set(v)
		}
	})
	return m, nil
}

// ObserveHTTP records one sync API request (an httpapi.ObserveFunc).
func (m *Metrics) ObserveHTTP(route httpapi.Route, status int, elapsed time.Duration) {
	name := string(route)
	if name == "" {
		name = "unmatched"
	}
	m.requests.WithLabelValues(name, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(name).Observe(elapsed.Seconds())
}

package platform

import (
	"database/sql"
	"strconv"

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
	bytesIn  *prometheus.CounterVec
	bytesOut *prometheus.CounterVec
	inflight prometheus.Gauge
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
			Help: "Sync API requests answered, by route, method, status and catalog code (\"\" for answers without an error).",
		}, []string{"route", "method", "status", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "syncd_http_request_duration_seconds",
			Help:    "Sync API request duration, by route and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_http_request_bytes_total",
			Help: "Sync API request body bytes read (as sent, before decompression), by route and method.",
		}, []string{"route", "method"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_http_response_bytes_total",
			Help: "Sync API response body bytes written (as sent, after compression), by route and method.",
		}, []string{"route", "method"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "syncd_http_requests_in_flight",
			Help: "Sync API requests being served (realtime sockets count while they are open).",
		}),
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
		build, ready, m.requests, m.duration, m.bytesIn, m.bytesOut, m.inflight, m.phase,
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
func (m *Metrics) ObserveHTTP(st httpapi.RequestStats) {
	route := st.Route.Path()
	if st.Route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, st.Method, strconv.Itoa(st.Status), string(st.Code)).Inc()
	m.duration.WithLabelValues(route, st.Method).Observe(st.Elapsed.Seconds())
	if st.BytesIn > 0 {
		m.bytesIn.WithLabelValues(route, st.Method).Add(float64(st.BytesIn))
	}
	if st.BytesOut > 0 {
		m.bytesOut.WithLabelValues(route, st.Method).Add(float64(st.BytesOut))
	}
}

// InFlightHTTP follows the sync API requests being served.
func (m *Metrics) InFlightHTTP(delta int) { m.inflight.Add(float64(delta)) }

// RegisterFanout exports the fanout's counters: listener queue
// overflows and, for a fanout with a connection (LISTEN/NOTIFY, NATS:
// listening and reconnects not nil), whether it is connected and how
// often it reconnected.
func (m *Metrics) RegisterFanout(overflows func() int64, listening func() bool, reconnects func() int64) error {
	if m == nil || m.Registry == nil {
		return nil
	}
	cs := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "syncd", Name: "fanout_overflows_total",
			Help: "Fanout listener queue overflows and NATS subscription drops (each one answered with a catch-up of every session)."},
			func() float64 { return float64(overflows()) }),
	}
	if listening != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "syncd", Name: "fanout_listening",
				Help: "1 while the fanout's connection (the PostgreSQL LISTEN connection, or the NATS subscription) is up, 0 otherwise."},
				func() float64 {
					if listening() {
						return 1
					}
					return 0
				}),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "syncd", Name: "fanout_reconnects_total",
				Help: "Fanout connections (LISTEN or NATS) re-established after the first (each one triggers a catch-up of every session)."},
				func() float64 { return float64(reconnects()) }))
	}
	for _, c := range cs {
		if err := m.Registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Pooled is a store on database/sql pools (both SQL engines).
type Pooled interface{ Pools() map[string]*sql.DB }

// RegisterPools exports the connection pools' statistics of a storage on
// database/sql pools (go_sql_* by db_name: open, in use, idle, waits,
// wait time); any other storage, or a nil m, exports nothing.
func (m *Metrics) RegisterPools(storage any) error {
	ps, ok := storage.(Pooled)
	if !ok || m == nil || m.Registry == nil {
		return nil
	}
	for role, db := range ps.Pools() {
		if err := m.Registry.Register(collectors.NewDBStatsCollector(db, "syncd_"+role)); err != nil {
			return err
		}
	}
	return nil
}

package realtime

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/domain/realtime"
)

// Counters is Metrics as Prometheus collectors.
type Counters struct {
	sockets prometheus.Gauge
	deltas  prometheus.Counter
	bytes   prometheus.Counter
	wakes   *prometheus.CounterVec
	dropped prometheus.Counter
	rounds  prometheus.Counter
	over    prometheus.Counter
	pevents *prometheus.CounterVec
	pdocs   prometheus.Gauge
	notices *prometheus.CounterVec
}

// NewCounters builds the collectors and registers them with reg (none
// with a nil reg: the counters still count).
func NewCounters(reg prometheus.Registerer) (*Counters, error) {
	r := &Counters{
		sockets: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "syncd", Name: "realtime_sockets",
			Help: "Open realtime sockets."}),
		deltas: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "syncd", Name: "realtime_deltas_total",
			Help: "Realtime deltas sent."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "syncd", Name: "realtime_delta_bytes_total",
			Help: "Bytes of the realtime deltas sent."}),
		wakes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "syncd", Name: "realtime_wakes_total",
			Help: "Realtime wake-ups sent, by reason."}, []string{"reason"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "syncd", Name: "realtime_deltas_dropped_total",
			Help: "Realtime deltas not sent (suppressed, mid-round, oversize or slow consumer) and answered with a wake-up."}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "syncd", Name: "realtime_rounds_total",
			Help: "Sync rounds served over realtime sockets."}),
		over: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "syncd", Name: "realtime_overflow_closes_total",
			Help: "Realtime sockets closed because their send queue overflowed (a client that does not read)."}),
		pevents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "syncd", Name: "realtime_presence_events_total",
			Help: "Presence events: join, update, leave, forbidden and too_large publishes, publishes held past the socket's rate, remote changes heard from other nodes."}, []string{"event"}),
		pdocs: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "syncd", Name: "realtime_presence_docs",
			Help: "Presence documents held on this node (its own and those heard from other nodes)."}),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "syncd", Name: "fanout_notices_total",
			Help: "Commit notices: published (or publish_failed) by this node, received from any node, and resyncs after the listener may have lost some."}, []string{"event"}),
	}
	if reg == nil {
		return r, nil
	}
	for _, c := range []prometheus.Collector{r.sockets, r.deltas, r.bytes, r.wakes, r.dropped, r.rounds, r.over, r.pevents, r.pdocs, r.notices} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Counters) Sockets(d int) { r.sockets.Add(float64(d)) }
func (r *Counters) Delta(n int)   { r.deltas.Inc(); r.bytes.Add(float64(n)) }
func (r *Counters) Wake(reason realtime.WakeReason) {
	r.wakes.WithLabelValues(string(reason)).Inc()
}
func (r *Counters) Dropped()  { r.dropped.Inc() }
func (r *Counters) Round()    { r.rounds.Inc() }
func (r *Counters) Overflow() { r.over.Inc() }
func (r *Counters) Presence(event string) {
	r.pevents.WithLabelValues(event).Inc()
}
func (r *Counters) PresenceDocs(d int)  { r.pdocs.Add(float64(d)) }
func (r *Counters) Notice(event string) { r.notices.WithLabelValues(event).Inc() }

// NoSessions is the ports.ScopeRefresher of a node without realtime: it
// has no session to refresh.
type NoSessions struct{}

// RefreshScopes refreshes nothing.
func (NoSessions) RefreshScopes(context.Context, string, string) int { return 0 }

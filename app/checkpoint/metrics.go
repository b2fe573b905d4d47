package checkpoint

import (
	"github.com/prometheus/client_golang/prometheus"

	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
)

// Metrics are the backfill counters and gauges, by checkpoint name (not
// by partition: partitions may be many). A nil *Metrics records nothing.
type Metrics struct {
	batches     *prometheus.CounterVec
	rows        *prometheus.CounterVec
	activations *prometheus.CounterVec
	runs        *prometheus.CounterVec
	watermark   *prometheus.GaugeVec
	observed    *prometheus.GaugeVec
}

// NewMetrics registers the backfill metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_backfill_batches_total",
			Help: "Backfill batches committed (one server commit each), by checkpoint.",
		}, []string{"checkpoint"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_backfill_rows_written_total",
			Help: "Rows backfill batches wrote, by checkpoint.",
		}, []string{"checkpoint"}),
		activations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_backfill_activations_total",
			Help: "Checkpoint activation attempts, by checkpoint and outcome (activated, stale, unverifiable).",
		}, []string{"checkpoint", "outcome"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_backfill_runs_total",
			Help: "Backfill runs ended, by outcome (activated, superseded, failed).",
		}, []string{"outcome"}),
		watermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "syncd_backfill_watermark",
			Help: "The last stored watermark (commit seq) of a running backfill, by checkpoint.",
		}, []string{"checkpoint"}),
		observed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "syncd_backfill_observed_rows",
			Help: "Source rows a running backfill examined so far, by checkpoint.",
		}, []string{"checkpoint"}),
	}
	for _, c := range []prometheus.Collector{m.batches, m.rows, m.activations, m.runs, m.watermark, m.observed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, o := range []string{string(OutcomeActivated), string(OutcomeSuperseded), "failed"} {
		m.runs.WithLabelValues(o)
	}
	return m, nil
}

func (m *Metrics) batch(name string, rows int) {
	if m == nil {
		return
	}
	m.batches.WithLabelValues(name).Inc()
	m.rows.WithLabelValues(name).Add(float64(rows))
}

func (m *Metrics) progress(p Progress) {
	if m == nil {
		return
	}
	m.watermark.WithLabelValues(p.Name).Set(float64(p.Watermark))
	m.observed.WithLabelValues(p.Name).Set(float64(p.ObservedRows))
}

func (m *Metrics) activation(name string, a cpdomain.Activation) {
	if m == nil {
		return
	}
	m.activations.WithLabelValues(name, string(a)).Inc()
}

func (m *Metrics) ended(outcome string) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(outcome).Inc()
}

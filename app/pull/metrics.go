package pull

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/syncd-dev/syncd/app/segments"
)

var _ segments.BuildMetrics = (*Metrics)(nil)

// Metrics are the pull counters, those of the bootstrap segments the
// segment builder makes included. A nil *Metrics records nothing.
type Metrics struct {
	builds   prometheus.Counter
	reuses   prometheus.Counter
	sections *prometheus.CounterVec
	commitsN prometheus.Counter
	restarts prometheus.Counter
	expired  prometheus.Counter
	spills   prometheus.Counter
	skips    prometheus.Counter

	imageBuilds   prometheus.Counter
	imageReuses   prometheus.Counter
	imageDeclines *prometheus.CounterVec
	imageRows     prometheus.Counter
	imageBytes    prometheus.Counter
	imageSeconds  prometheus.Histogram
	catchUps      *prometheus.CounterVec
	windows       *prometheus.CounterVec
}

// NewMetrics registers the pull counters on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		builds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_pull_segment_builds_total",
			Help: "Bootstrap rows segments built (pages scanned and encoded).",
		}),
		reuses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_pull_segment_reuses_total",
			Help: "Bootstrap pages served from a stored segment found by its publication key.",
		}),
		sections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_pull_sections_total",
			Help: "Subscription sections served, by kind (incremental, bootstrap, revoked, reset).",
		}, []string{"kind"}),
		commitsN: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_pull_commits_total",
			Help: "COMMIT frames served by incremental pulls.",
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_pull_bootstrap_restarts_total",
			Help: "Bootstraps restarted with a fresh pin because the resume token was unusable or behind the horizon.",
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_pull_horizon_resets_total",
			Help: "Incremental sections turned into a cursor_expired reset by the horizon re-check after the window read.",
		}),
		spills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_pull_response_spills_total",
			Help: "Sync responses whose read-verify buffer spilled from memory to a temporary file.",
		}),
		skips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_pull_client_record_skips_total",
			Help: "Pulls that left a fresh, unchanged client record as stored instead of rewriting it for a cursor move.",
		}),
	}
	m.imageBuilds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "syncd_pull_image_builds_total",
		Help: "SQLite-image segments built and stored (SPEC §5.3).",
	})
	m.imageReuses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "syncd_pull_image_reuses_total",
		Help: "Image-lane bootstraps served from a stored image found by its key.",
	})
	m.imageDeclines = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "syncd_pull_image_declines_total",
		Help: "Image-lane bootstraps served on the rows lane instead, by reason (one_page: the snapshot fits one rows page; unrepresentable: a value no image cell holds exactly; build_failed: the image builder failed).",
	}, []string{"reason"})
	m.imageRows = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "syncd_pull_image_rows_total",
		Help: "Rows written into built SQLite images.",
	})
	m.imageBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "syncd_pull_image_bytes_total",
		Help: "Bytes of built SQLite images.",
	})
	m.imageSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "syncd_pull_image_build_seconds",
		Help:    "Time to build one SQLite image (scan, write, read back).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
	})
	m.catchUps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "syncd_pull_catchups_total",
		Help: "Far-behind incremental pulls answered through segments (SPEC §8.4), by outcome (segments: a bootstrap section in the same response; reset: a forced re-bootstrap, the window holding deletes).",
	}, []string{"outcome"})
	m.windows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "syncd_pull_windows_total",
		Help: "Incremental commit windows read, by source (memory: held whole by the store's recent log; log: read from the database).",
	}, []string{"source"})
	for _, c := range []prometheus.Collector{m.builds, m.reuses, m.sections, m.commitsN, m.restarts, m.expired, m.spills, m.skips,
		m.imageBuilds, m.imageReuses, m.imageDeclines, m.imageRows, m.imageBytes, m.imageSeconds, m.catchUps, m.windows} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// PageBuilt implements segments.BuildMetrics: a rows page was built.
func (m *Metrics) PageBuilt() {
	if m != nil {
		m.builds.Inc()
	}
}

// PageReused implements segments.BuildMetrics: a rows page was reused.
func (m *Metrics) PageReused() {
	if m != nil {
		m.reuses.Inc()
	}
}

func (m *Metrics) section(k sectionKind) {
	if m != nil {
		m.sections.WithLabelValues(k.String()).Inc()
	}
}

func (m *Metrics) commits(n int) {
	if m != nil && n > 0 {
		m.commitsN.Add(float64(n))
	}
}

func (m *Metrics) restart() {
	if m != nil {
		m.restarts.Inc()
	}
}

func (m *Metrics) window(source string) {
	if m != nil {
		m.windows.WithLabelValues(source).Inc()
	}
}

// Windows returns how many commit windows were read from source
// ("memory" or "log"); 0 for a nil *Metrics.
func (m *Metrics) Windows(source string) float64 {
	if m == nil {
		return 0
	}
	var out dto.Metric
	if err := m.windows.WithLabelValues(source).Write(&out); err != nil {
		return 0
	}
	return out.GetCounter().GetValue()
}

func (m *Metrics) horizonResets() {
	if m != nil {
		m.expired.Inc()
	}
}

func (m *Metrics) spilled() {
	if m != nil {
		m.spills.Inc()
	}
}

func (m *Metrics) clientRecordSkipped() {
	if m != nil {
		m.skips.Inc()
	}
}

// Value returns the current value of the counter named name (for tests
// and tools); 0 for an unknown name or a nil *Metrics.
func (m *Metrics) Value(name string) float64 {
	if m == nil {
		return 0
	}
	var c prometheus.Collector
	switch name {
	case "syncd_pull_segment_builds_total":
		c = m.builds
	case "syncd_pull_segment_reuses_total":
		c = m.reuses
	case "syncd_pull_commits_total":
		c = m.commitsN
	case "syncd_pull_bootstrap_restarts_total":
		c = m.restarts
	case "syncd_pull_horizon_resets_total":
		c = m.expired
	case "syncd_pull_response_spills_total":
		c = m.spills
	case "syncd_pull_client_record_skips_total":
		c = m.skips
	case "syncd_pull_image_builds_total":
		c = m.imageBuilds
	case "syncd_pull_image_reuses_total":
		c = m.imageReuses
	case "syncd_pull_image_declines_total":
		c = m.imageDeclines
	case "syncd_pull_image_rows_total":
		c = m.imageRows
	case "syncd_pull_catchups_total":
		c = m.catchUps
	default:
		return 0
	}
	// A vector's value is the sum over its labels.
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	total := 0.0
	for mt := range ch {
		var out dto.Metric
		if err := mt.Write(&out); err == nil {
			total += out.GetCounter().GetValue()
		}
	}
	return total
}

// ImageBuilt implements segments.BuildMetrics: an image was built and
// stored.
func (m *Metrics) ImageBuilt(rows int64, bytes int, d time.Duration) {
	if m != nil {
		m.imageBuilds.Inc()
		m.imageRows.Add(float64(rows))
		m.imageBytes.Add(float64(bytes))
		m.imageSeconds.Observe(d.Seconds())
	}
}

// ImageReused implements segments.BuildMetrics: a stored image was found.
func (m *Metrics) ImageReused() {
	if m != nil {
		m.imageReuses.Inc()
	}
}

// ImageDeclined implements segments.BuildMetrics: the rows lane serves
// an image-lane bootstrap.
func (m *Metrics) ImageDeclined(reason string) {
	if m != nil {
		m.imageDeclines.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) catchUp(outcome string) {
	if m != nil {
		m.catchUps.WithLabelValues(outcome).Inc()
	}
}

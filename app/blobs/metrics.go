package blobs

import "github.com/prometheus/client_golang/prometheus"

// Counters is Metrics as Prometheus collectors.
type Counters struct {
	uploads   *prometheus.CounterVec
	bytes     prometheus.Counter
	grants    *prometheus.CounterVec
	downloads *prometheus.CounterVec
	claimed   prometheus.Counter
	deleted   prometheus.Counter
	passes    *prometheus.CounterVec
}

// NewCounters builds the collectors and registers them with reg.
func NewCounters(reg prometheus.Registerer) (*Counters, error) {
	b := &Counters{
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_blob_uploads_total",
			Help: "Blob uploads accepted, direct or through a presigned URL of the server, by result (stored: new bytes; existing: already stored).",
		}, []string{"result"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_blob_upload_bytes_total",
			Help: "Bytes of the blobs uploads stored.",
		}),
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_blob_upload_grants_total",
			Help: "Upload grants answered, by answer (url, present, none).",
		}, []string{"answer"}),
		downloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_blob_downloads_total",
			Help: "Authorized blob downloads, by delivery (bytes: streamed here; url: a presigned URL answered; object: a native presigned URL served).",
		}, []string{"delivery"}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_blob_orphans_claimed_total",
			Help: "Orphan blobs the sweep claimed for deletion.",
		}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "syncd_blob_swept_total",
			Help: "Orphan blobs the sweep deleted.",
		}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_blob_sweeps_total",
			Help: "Scheduled orphan blob sweeps, by result (ok, error).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{b.uploads, b.bytes, b.grants, b.downloads, b.claimed, b.deleted, b.passes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *Counters) Uploaded(created bool, n int64) {
	if !created {
		b.uploads.WithLabelValues("existing").Inc()
		return
	}
	b.uploads.WithLabelValues("stored").Inc()
	b.bytes.Add(float64(n))
}

func (b *Counters) Granted(answer string) { b.grants.WithLabelValues(answer).Inc() }

func (b *Counters) Downloaded(delivery string) { b.downloads.WithLabelValues(delivery).Inc() }

func (b *Counters) Collected(r GCResult) {
	b.claimed.Add(float64(r.Claimed))
	b.deleted.Add(float64(r.Deleted))
}

func (b *Counters) GCPassed(failed bool) {
	result := "ok"
	if failed {
		result = "error"
	}
	b.passes.WithLabelValues(result).Inc()
}

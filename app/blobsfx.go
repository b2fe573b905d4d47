package app

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/blobs/memblob"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/blobs"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/ports"
)

// BlobsModule provides the blob store (--blob-store), the blob use case
// and, from it, the push-time existence check (ports.BlobChecker); it
// serves the blob routes under the mount and sweeps orphan blobs every
// --blob-sweep-interval. Without a ports.Storage in the graph, or with
// --blob-store none, it provides nothing: the blob routes answer
// sync.not_found and every push that references a blob is refused
// blob.not_found.
//
// A host replaces the store with fx.Decorate:
//
//	fx.Decorate(func(ports.BlobStore) ports.BlobStore { return myStore })
var BlobsModule = fx.Module("syncd.blobs",
	fx.Provide(
		NewBlobStore,
		NewBlobService,
		newBlobChecker,
		fx.Annotate(newBlobRoutes, fx.ResultTags(`group:"syncd.routes,flatten"`)),
		NewBlobSweeper,
	),
	fx.Invoke(startBlobSweeper),
)

// BlobStoreParams are the inputs of the blob store.
type BlobStoreParams struct {
	fx.In
	Config config.Config
	Log    *zap.Logger
	Store  ports.Storage `optional:"true"`
}

// NewBlobStore opens the configured blob store; nil without storage or
// with --blob-store none.
func NewBlobStore(lc fx.Lifecycle, p BlobStoreParams) (ports.BlobStore, error) {
	if p.Store == nil {
		return nil, nil
	}
	return OpenBlobStore(context.Background(), p.Config, p.Store, p.Log)
}

// OpenBlobStore opens the blob store --blob-store names over st (the sync
// storage, whose database --blob-store db shares); nil with none. Each
// kind is one case.
func OpenBlobStore(_ context.Context, cfg config.Config, _ ports.Storage, log *zap.Logger) (ports.BlobStore, error) {
	switch kind := cfg.Blobs.Store; kind {
	case config.BlobStoreNone:
		return nil, nil
	case config.BlobStoreDB:
		log.Warn("blobs are kept in process memory: this build has no database blob store yet, and they vanish on restart")
		return memblob.New(), nil
	default:
		return nil, fmt.Errorf("--blob-store %s: this build has no %s blob store", kind, kind)
	}
}

// BlobServiceParams are the inputs of the blob use case.
type BlobServiceParams struct {
	fx.In
	Config    config.Config
	Log       *zap.Logger
	Clock     ports.Clock
	Readiness *Readiness
	Resolver  ports.ScopeResolver
	Metrics   *Metrics
	Store     ports.Storage     `optional:"true"`
	Blobs     ports.BlobStore   `optional:"true"`
	Signer    *signedurl.Signer `optional:"true"`
}

// NewBlobService builds the blob use case; nil without a blob store.
func NewBlobService(p BlobServiceParams) (*blobs.Service, error) {
	if p.Store == nil || p.Blobs == nil {
		return nil, nil
	}
	m, err := newBlobMetrics(p.Metrics)
	if err != nil {
		return nil, err
	}
	cfg := p.Config.Blobs
	o := blobs.Options{
		Blobs:       p.Blobs,
		Storage:     p.Store,
		Resolver:    p.Resolver,
		Schema:      p.Readiness.Schema,
		MaxBytes:    cfg.MaxBytes,
		URLTTL:      cfg.URLTTL,
		OrphanGrace: cfg.OrphanGrace,
		Metrics:     m,
		Now:         p.Clock.Now,
		Log:         p.Log.Named("blobs"),
	}
	if cfg.Presign {
		o.Presign = func() bool { return true }
		o.Signer, o.URLBase = p.Signer, p.Config.Segments.PublicURL
	}
	return blobs.New(o)
}

// newBlobChecker hands the use case to the push pipeline as its blob
// existence check; none without the use case (every blob_ref refused).
func newBlobChecker(s *blobs.Service) ports.BlobChecker {
	if s == nil {
		return nil
	}
	return s
}

type blobRouteParams struct {
	fx.In
	Transport *httpapi.Transport
	Auth      ports.Authenticator
	Service   *blobs.Service `optional:"true"`
	Log       *zap.Logger
}

func newBlobRoutes(p blobRouteParams) ([]RouteHandler, error) {
	if p.Service == nil {
		return nil, nil
	}
	if p.Auth == nil {
		return nil, errNoAuthenticator
	}
	return BlobRoutes(p.Transport, p.Auth, p.Service, p.Log.Named("blobs")), nil
}

// BlobRoutes are the blob routes served by svc: upload, upload grant,
// download, and the native presigned object URLs.
func BlobRoutes(t *httpapi.Transport, auth ports.Authenticator, svc httpapi.BlobService, log *zap.Logger) []RouteHandler {
	return []RouteHandler{
		{Route: httpapi.RouteBlobPut, Handler: t.BlobUploadEndpoint(auth, svc, log)},
		{Route: httpapi.RouteBlobUploadGrant, Handler: t.BlobUploadGrantEndpoint(auth, svc, log)},
		{Route: httpapi.RouteBlobGet, Handler: t.BlobDownloadEndpoint(auth, svc, log)},
		{Route: httpapi.RouteBlobObjectGet, Handler: httpapi.BlobObjectGetEndpoint(svc, log)},
		{Route: httpapi.RouteBlobObjectPut, Handler: httpapi.BlobObjectPutEndpoint(svc, log)},
	}
}

// BlobSweeperParams are the inputs of the orphan sweep scheduler.
type BlobSweeperParams struct {
	fx.In
	Config  config.Config
	Log     *zap.Logger
	Clock   Clock
	Metrics *Metrics
	Service *blobs.Service `optional:"true"`
}

// NewBlobSweeper builds the orphan sweep scheduler on the app clock; nil
// without the blob use case or with --blob-sweep-interval 0.
func NewBlobSweeper(p BlobSweeperParams) (*blobs.Scheduler, error) {
	if p.Service == nil || p.Config.Blobs.SweepInterval <= 0 {
		return nil, nil
	}
	passes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "syncd_blob_sweeps_total",
		Help: "Scheduled orphan blob sweeps, by result (ok, error).",
	}, []string{"result"})
	if err := p.Metrics.Registry.Register(passes); err != nil {
		return nil, err
	}
	onPass := func(_ []blobs.SweepResult, err error) {
		result := "ok"
		if err != nil {
			result = "error"
		}
		passes.WithLabelValues(result).Inc()
	}
	return blobs.NewScheduler(p.Service.Sweeper, p.Config.Blobs.SweepInterval, p.Clock.Sleep, p.Log.Named("blobs"), onPass), nil
}

func startBlobSweeper(lc fx.Lifecycle, s *blobs.Scheduler) {
	if s == nil {
		return
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { s.Start(); return nil },
		OnStop:  s.Stop,
	})
}

// blobMetrics feeds the blob use case's counters.
type blobMetrics struct {
	uploads   *prometheus.CounterVec
	bytes     prometheus.Counter
	grants    *prometheus.CounterVec
	downloads *prometheus.CounterVec
	claimed   prometheus.Counter
	deleted   prometheus.Counter
}

func newBlobMetrics(m *Metrics) (*blobMetrics, error) {
	b := &blobMetrics{
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
	}
	for _, c := range []prometheus.Collector{b.uploads, b.bytes, b.grants, b.downloads, b.claimed, b.deleted} {
		if err := m.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *blobMetrics) Uploaded(created bool, n int64) {
	if !created {
		b.uploads.WithLabelValues("existing").Inc()
		return
	}
	b.uploads.WithLabelValues("stored").Inc()
	b.bytes.Add(float64(n))
}

func (b *blobMetrics) Granted(answer string) { b.grants.WithLabelValues(answer).Inc() }

func (b *blobMetrics) Downloaded(delivery string) { b.downloads.WithLabelValues(delivery).Inc() }

func (b *blobMetrics) Swept(r blobs.SweepResult) {
	b.claimed.Add(float64(r.Claimed))
	b.deleted.Add(float64(r.Deleted))
}

package wiring

import (
	"context"
	"fmt"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/blobs/fsblob"
	"github.com/syncd-dev/syncd/adapters/blobs/memblob"
	"github.com/syncd-dev/syncd/adapters/blobs/s3blob"
	"github.com/syncd-dev/syncd/adapters/blobs/sqlblob"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/blobs"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/app/platform"
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
	),
	fx.Invoke(scheduleBlobGC),
)

// BlobStoreParams are the inputs of the blob store.
type BlobStoreParams struct {
	fx.In
	Config config.Config
	Log    *zap.Logger
	Store  ports.Storage `optional:"true"`
}

// NewBlobStore opens the configured blob store; nil without storage or
// with --blob-store none. The database store creates its tables when the
// server starts, before the sync API serves.
func NewBlobStore(lc fx.Lifecycle, p BlobStoreParams, clk ports.Clock) (ports.BlobStore, error) {
	if p.Store == nil {
		return nil, nil
	}
	if _, sql := p.Store.(dbHandles); sql && p.Config.Blobs.Store == config.BlobStoreDB {
		var s ports.BlobStore
		lc.Append(fx.Hook{OnStart: func(ctx context.Context) error {
			var err error
			s, err = OpenBlobStore(ctx, p.Config, p.Store, clk, p.Log)
			return err
		}})
		return platform.NewLazyBlobs(func() ports.BlobStore { return s }), nil
	}
	return OpenBlobStore(context.Background(), p.Config, p.Store, clk, p.Log)
}

// OpenBlobStore opens the blob store --blob-store names: db in the
// database of st (SQLite or PostgreSQL; over any other storage, process
// memory), fs in --blob-dir, s3 in --blob-s3-bucket with the credentials
// of the standard AWS chain (environment, shared files, instance and task
// roles); nil with none. clk signs the bucket's presigned URLs.
func OpenBlobStore(ctx context.Context, cfg config.Config, st ports.Storage, clk ports.Clock, log *zap.Logger) (ports.BlobStore, error) {
	b := cfg.Blobs
	switch b.Store {
	case config.BlobStoreNone:
		return nil, nil
	case config.BlobStoreDB:
		h, ok := st.(dbHandles)
		if !ok {
			log.Warn("the storage is not an SQL engine: blobs are kept in process memory and vanish with it")
			return memblob.New(), nil
		}
		s, err := sqlblob.Open(ctx, sqlblob.Options{DB: h.DB(), ReadDB: h.ReadDB()})
		if err != nil {
			return nil, err
		}
		return s, nil
	case config.BlobStoreFS:
		s, err := fsblob.Open(fsblob.Options{Dir: b.Dir})
		if err != nil {
			return nil, err
		}
		return s, nil
	case config.BlobStoreS3:
		var opts []func(*awsconfig.LoadOptions) error
		if b.S3.Region != "" {
			opts = append(opts, awsconfig.WithRegion(b.S3.Region))
		}
		aws, err := awsconfig.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("--blob-store s3: AWS configuration: %w", err)
		}
		s, err := s3blob.New(s3blob.Options{
			Endpoint: b.S3.Endpoint, Region: aws.Region, Bucket: b.S3.Bucket, Prefix: b.S3.Prefix,
			UsePathStyle: b.S3.PathStyle, Credentials: aws.Credentials, Clock: clk,
		})
		if err != nil {
			return nil, fmt.Errorf("--blob-store s3: %w", err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("--blob-store %q: want db, fs, s3 or none", b.Store)
}

// BlobServiceParams are the inputs of the blob use case.
type BlobServiceParams struct {
	fx.In
	Config    config.Config
	Log       *zap.Logger
	Clock     ports.Clock
	Readiness *platform.Readiness
	Resolver  ports.ScopeResolver
	Metrics   *platform.Metrics
	Store     ports.Storage     `optional:"true"`
	Blobs     ports.BlobStore   `optional:"true"`
	Signer    *signedurl.Signer `optional:"true"`
	Events    ports.EventSink   `optional:"true"`
}

// NewBlobService builds the blob use case; nil without a blob store.
func NewBlobService(p BlobServiceParams) (*blobs.Service, error) {
	if p.Store == nil || p.Blobs == nil {
		return nil, nil
	}
	m, err := blobs.NewCounters(p.Metrics.Registry)
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
		Events:      p.Events,
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

func newBlobRoutes(p blobRouteParams) ([]platform.RouteHandler, error) {
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
func BlobRoutes(t *httpapi.Transport, auth ports.Authenticator, svc ports.BlobService, log *zap.Logger) []platform.RouteHandler {
	return []platform.RouteHandler{
		{Route: httpapi.RouteBlobPut, Handler: t.BlobUploadEndpoint(auth, svc, log)},
		{Route: httpapi.RouteBlobUploadGrant, Handler: t.BlobUploadGrantEndpoint(auth, svc, log)},
		{Route: httpapi.RouteBlobGet, Handler: t.BlobDownloadEndpoint(auth, svc, log)},
		{Route: httpapi.RouteBlobObjectGet, Handler: t.BlobObjectGetEndpoint(svc, log)},
		{Route: httpapi.RouteBlobObjectPut, Handler: t.BlobObjectPutEndpoint(svc, log)},
	}
}

// BlobGCParams are the inputs of the blob GC job (the orphan sweep).
type BlobGCParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Log       *zap.Logger
	Scheduler *periodic.Scheduler
	Service   *blobs.Service `optional:"true"`
}

// scheduleBlobGC runs the blob GC every --blob-sweep-interval; off
// without the blob use case or with --blob-sweep-interval 0.
func scheduleBlobGC(p BlobGCParams) {
	if p.Service == nil || p.Config.Blobs.SweepInterval <= 0 {
		return
	}
	schedule(p.Lifecycle, p.Scheduler, periodic.Job{Name: "blob sweep", Interval: p.Config.Blobs.SweepInterval,
		Pass: p.Service.GC.Pass, Log: p.Log.Named("blobs")})
}

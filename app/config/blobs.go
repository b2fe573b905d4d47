package config

import (
	"flag"
	"fmt"
	"net/url"
	"time"
)

// Blob store kinds.
const (
	BlobStoreNone = "none"
	BlobStoreDB   = "db"
	BlobStoreFS   = "fs"
	BlobStoreS3   = "s3"
)

// Blobs are the blob store and download settings (SPEC §5.9).
type Blobs struct {
	// Store is where blob bytes live: db (tables in the sync database),
	// fs (a directory, see Dir), s3 (an S3-compatible bucket, see S3), or
	// none (no blob routes; a push referencing a blob is refused).
	Store string
	// Dir is the directory of --blob-store fs.
	Dir string
	// S3 is the bucket of --blob-store s3. Its credentials come from the
	// standard AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_SESSION_TOKEN, shared files, instance roles).
	S3 BlobS3
	// MaxBytes caps one blob (413 blob.too_large above).
	MaxBytes int64
	// Presign answers downloads and upload grants with presigned URLs:
	// the bucket's own with --blob-store s3, otherwise the server's native
	// ones (then --signed-url-key-file and --public-url are needed).
	Presign bool
	// URLTTL is a presigned URL's lifetime (at most 15 minutes).
	URLTTL time.Duration
	// OrphanGrace is how long a blob no row references is kept after its
	// upload (SPEC §5.9.2 default 24 h).
	OrphanGrace time.Duration
	// SweepInterval is how often orphans are swept (0: never; run
	// syncd blobs sweep instead).
	SweepInterval time.Duration
	// MinTransferRate is the average rate, in bytes per second, a blob
	// upload's body or download must keep once --body-read-timeout of
	// grace is spent; every read or write must also progress within
	// --body-read-timeout. A transfer that falls behind is cut (an upload
	// 408, nothing stored).
	MinTransferRate int64
}

// BlobS3 locate the bucket of --blob-store s3.
type BlobS3 struct {
	// Endpoint is the object store's URL; empty is AWS S3 in Region.
	Endpoint string
	Region   string
	Bucket   string
	// Prefix starts every key (several deployments may share a bucket).
	Prefix string
	// PathStyle addresses the bucket in the path (MinIO and most
	// S3-compatible servers).
	PathStyle bool
}

// DefaultBlobs returns the reference defaults: blobs in the sync
// database, so a schema with a blob_ref column works out of the box.
func DefaultBlobs() Blobs {
	return Blobs{Store: BlobStoreDB, MaxBytes: 64 << 20, URLTTL: 5 * time.Minute, OrphanGrace: 24 * time.Hour, SweepInterval: time.Hour,
		MinTransferRate: 32 << 10}
}

func (b *Blobs) flags(fs *flag.FlagSet) {
	fs.StringVar(&b.Store, "blob-store", b.Store, "where blob bytes are stored: db (the sync database), fs (--blob-dir), s3 (--blob-s3-bucket) or none (no blobs)")
	fs.StringVar(&b.Dir, "blob-dir", b.Dir, "directory of --blob-store fs")
	fs.StringVar(&b.S3.Endpoint, "blob-s3-endpoint", b.S3.Endpoint, "--blob-store s3: URL of an S3-compatible server (empty: AWS S3); credentials come from the standard AWS environment")
	fs.StringVar(&b.S3.Region, "blob-s3-region", b.S3.Region, "--blob-store s3: signing region")
	fs.StringVar(&b.S3.Bucket, "blob-s3-bucket", b.S3.Bucket, "--blob-store s3: the bucket (it must exist)")
	fs.StringVar(&b.S3.Prefix, "blob-s3-prefix", b.S3.Prefix, "--blob-store s3: prefix of every key, e.g. syncd/blobs/")
	fs.BoolVar(&b.S3.PathStyle, "blob-s3-path-style", b.S3.PathStyle, "--blob-store s3: address the bucket in the URL path (MinIO and most S3-compatible servers)")
	fs.Int64Var(&b.MaxBytes, "blob-max-bytes", b.MaxBytes, "largest blob accepted (413 blob.too_large above)")
	fs.BoolVar(&b.Presign, "blob-presign", b.Presign, "answer downloads and upload grants with presigned URLs (the bucket's with s3, else native ones: needs --signed-url-key-file and --public-url)")
	fs.DurationVar(&b.URLTTL, "blob-url-ttl", b.URLTTL, "lifetime of a presigned blob URL (at most 15m)")
	fs.DurationVar(&b.OrphanGrace, "blob-orphan-grace", b.OrphanGrace, "how long a blob no row references is kept after its upload")
	fs.DurationVar(&b.SweepInterval, "blob-sweep-interval", b.SweepInterval, "how often orphan blobs are deleted (0 never; see syncd blobs sweep)")
	fs.Int64Var(&b.MinTransferRate, "blob-min-transfer-rate", b.MinTransferRate, "bytes per second a blob upload or download must average after --body-read-timeout of grace (each read or write must also progress within --body-read-timeout); slower ones are cut, an upload with 408 and nothing stored")
}

func (b Blobs) validate(seg Segments) []error {
	var errs []error
	switch b.Store {
	case BlobStoreNone, BlobStoreDB:
	case BlobStoreFS:
		if b.Dir == "" {
			errs = append(errs, fmt.Errorf("--blob-store fs needs --blob-dir"))
		}
	case BlobStoreS3:
		if b.S3.Bucket == "" {
			errs = append(errs, fmt.Errorf("--blob-store s3 needs --blob-s3-bucket"))
		}
		if b.S3.Endpoint != "" {
			if u, err := url.Parse(b.S3.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("--blob-s3-endpoint %q: want an http(s) URL", b.S3.Endpoint))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("--blob-store %q: want db, fs, s3 or none", b.Store))
	}
	// Settings the chosen store would ignore.
	if b.Dir != "" && b.Store != BlobStoreFS {
		errs = append(errs, fmt.Errorf("--blob-dir only applies to --blob-store fs (--blob-store is %s)", b.Store))
	}
	if b.S3 != (BlobS3{}) && b.Store != BlobStoreS3 {
		errs = append(errs, fmt.Errorf("--blob-s3-* only apply to --blob-store s3 (--blob-store is %s)", b.Store))
	}
	if b.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("--blob-max-bytes %d: must be positive", b.MaxBytes))
	}
	if b.URLTTL <= 0 || b.URLTTL > 15*time.Minute {
		errs = append(errs, fmt.Errorf("--blob-url-ttl %s: want more than 0 and at most 15m", b.URLTTL))
	}
	if b.OrphanGrace <= 0 {
		errs = append(errs, fmt.Errorf("--blob-orphan-grace %s: must be positive", b.OrphanGrace))
	}
	if b.MinTransferRate <= 0 {
		errs = append(errs, fmt.Errorf("--blob-min-transfer-rate %d: must be positive (bytes per second)", b.MinTransferRate))
	}
	if b.SweepInterval < 0 {
		errs = append(errs, fmt.Errorf("--blob-sweep-interval must not be negative"))
	}
	if b.Presign {
		switch {
		case b.Store == BlobStoreNone:
			errs = append(errs, fmt.Errorf("--blob-presign needs a blob store (--blob-store is none)"))
		case b.Store != BlobStoreS3 && (seg.SignedURLKeyFile == "" || seg.PublicURL == ""):
			errs = append(errs, fmt.Errorf("--blob-presign with --blob-store %s mints native URLs: it needs --signed-url-key-file and --public-url", b.Store))
		}
	}
	return errs
}

package config_test

import (
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
)

func TestBlobSettings(t *testing.T) {
	signed := []string{"--signed-url-key-file", "/k", "--public-url", "https://sync.example.com/api"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		wantErr string
		check   func(t *testing.T, b config.Blobs)
	}{
		{name: "defaults", check: func(t *testing.T, b config.Blobs) {
			if b != config.DefaultBlobs() || b.Store != "db" || b.MaxBytes != 64<<20 || b.OrphanGrace != 24*time.Hour || b.Presign || b.URLTTL != 5*time.Minute || b.SweepInterval != time.Hour || b.MinTransferRate != 32<<10 {
				t.Fatalf("got %+v", b)
			}
		}},
		{name: "filesystem", args: []string{"--blob-store", "fs", "--blob-dir", "/var/blobs", "--blob-max-bytes", "1048576"}, check: func(t *testing.T, b config.Blobs) {
			if b.Store != "fs" || b.Dir != "/var/blobs" || b.MaxBytes != 1<<20 {
				t.Fatalf("got %+v", b)
			}
		}},
		{name: "s3 from the environment", env: []string{"SYNCD_BLOB_STORE=s3", "SYNCD_BLOB_S3_BUCKET=att", "SYNCD_BLOB_S3_ENDPOINT=http://127.0.0.1:9000", "SYNCD_BLOB_S3_PATH_STYLE=true", "SYNCD_BLOB_S3_PREFIX=syncd/", "SYNCD_BLOB_S3_REGION=eu-west-1", "SYNCD_BLOB_PRESIGN=true"},
			check: func(t *testing.T, b config.Blobs) {
				want := config.BlobS3{Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1", Bucket: "att", Prefix: "syncd/", PathStyle: true}
				if b.Store != "s3" || b.S3 != want || !b.Presign {
					t.Fatalf("got %+v", b)
				}
			}},
		{name: "native presign", args: append([]string{"--blob-presign", "--blob-url-ttl", "15m"}, signed...), check: func(t *testing.T, b config.Blobs) {
			if !b.Presign || b.URLTTL != 15*time.Minute {
				t.Fatalf("got %+v", b)
			}
		}},
		{name: "sweep settings", args: []string{"--blob-orphan-grace", "2h", "--blob-sweep-interval", "0s"}, check: func(t *testing.T, b config.Blobs) {
			if b.OrphanGrace != 2*time.Hour || b.SweepInterval != 0 {
				t.Fatalf("got %+v", b)
			}
		}},
		{name: "no blobs", args: []string{"--blob-store", "none"}, check: func(t *testing.T, b config.Blobs) {
			if b.Store != "none" {
				t.Fatalf("got %+v", b)
			}
		}},
		{name: "unknown store", args: []string{"--blob-store", "gcs"}, wantErr: "want db, fs, s3 or none"},
		{name: "fs without dir", args: []string{"--blob-store", "fs"}, wantErr: "--blob-dir"},
		{name: "dir without fs", args: []string{"--blob-dir", "/x"}, wantErr: "only applies to --blob-store fs"},
		{name: "s3 without bucket", args: []string{"--blob-store", "s3"}, wantErr: "--blob-s3-bucket"},
		{name: "s3 options without s3", args: []string{"--blob-s3-bucket", "b"}, wantErr: "only apply to --blob-store s3"},
		{name: "bad endpoint", args: []string{"--blob-store", "s3", "--blob-s3-bucket", "b", "--blob-s3-endpoint", "minio:9000"}, wantErr: "--blob-s3-endpoint"},
		{name: "transfer rate", args: []string{"--blob-min-transfer-rate", "1024"}, check: func(t *testing.T, b config.Blobs) {
			if b.MinTransferRate != 1024 {
				t.Fatalf("got %+v", b)
			}
		}},
		{name: "zero transfer rate", args: []string{"--blob-min-transfer-rate", "0"}, wantErr: "--blob-min-transfer-rate"},
		{name: "zero cap", args: []string{"--blob-max-bytes", "0"}, wantErr: "--blob-max-bytes"},
		{name: "url ttl too long", args: []string{"--blob-url-ttl", "16m"}, wantErr: "at most 15m"},
		{name: "zero grace", args: []string{"--blob-orphan-grace", "0s"}, wantErr: "--blob-orphan-grace"},
		{name: "negative sweep interval", args: []string{"--blob-sweep-interval", "-1s"}, wantErr: "--blob-sweep-interval"},
		{name: "native presign without a key", args: []string{"--blob-presign"}, wantErr: "--signed-url-key-file and --public-url"},
		{name: "presign without a store", args: append([]string{"--blob-presign", "--blob-store", "none"}, signed...), wantErr: "needs a blob store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadSettings(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			tc.check(t, cfg.Blobs)
		})
	}
}

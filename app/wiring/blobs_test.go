package wiring

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/blobs/fsblob"
	"github.com/syncd-dev/syncd/adapters/blobs/memblob"
	"github.com/syncd-dev/syncd/adapters/blobs/s3blob"
	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/ports"
)

func TestNewBlobStore(t *testing.T) {
	log := zap.NewNop()
	clk := platform.NewClock()
	cfg := config.Default()
	for _, tc := range []struct {
		name    string
		edit    func(*config.Blobs)
		storage bool
		check   func(ports.BlobStore) bool
	}{
		{"without storage", nil, false, func(s ports.BlobStore) bool { return s == nil }},
		{"none", func(b *config.Blobs) { b.Store = config.BlobStoreNone }, true, func(s ports.BlobStore) bool { return s == nil }},
		{"db over the in-memory storage", nil, true, func(s ports.BlobStore) bool { _, ok := s.(*memblob.Store); return ok }},
		{"fs", func(b *config.Blobs) { b.Store, b.Dir = config.BlobStoreFS, filepath.Join(t.TempDir(), "blobs") }, true,
			func(s ports.BlobStore) bool { _, ok := s.(*fsblob.Store); return ok }},
		{"s3 (no request made)", func(b *config.Blobs) {
			b.Store, b.S3 = config.BlobStoreS3, config.BlobS3{Endpoint: "http://127.0.0.1:1", Region: "eu-west-1", Bucket: "b", PathStyle: true}
		}, true, func(s ports.BlobStore) bool { _, ok := s.(*s3blob.Store); return ok }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.edit != nil {
				tc.edit(&c.Blobs)
			}
			p := BlobStoreParams{Config: c, Log: log}
			if tc.storage {
				p.Store = memory.New()
			}
			s, err := NewBlobStore(fxtest.NewLifecycle(t), p, clk)
			if err != nil || !tc.check(s) {
				t.Fatalf("got %T %v", s, err)
			}
		})
	}

	// db over an SQL engine: the database store, its tables made at start.
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "sync.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lc := fxtest.NewLifecycle(t)
	s, err := NewBlobStore(lc, BlobStoreParams{Config: cfg, Log: log, Store: st}, clk)
	if err != nil {
		t.Fatal(err)
	}
	lc.RequireStart()
	defer lc.RequireStop()
	b := []byte("in the sync database")
	u := ports.BlobUpload{Partition: "p", BlobID: contentaddr.Of(b), ByteLength: int64(len(b)), MaxBytes: 1 << 10, CreatedAtMs: 1}
	if _, created, err := s.Put(context.Background(), u, bytes.NewReader(b)); err != nil || !created {
		t.Fatalf("Put = %v %v", created, err)
	}
	var n int
	if err := st.ReadDB().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM sync_blobs").Scan(&n); err != nil || n != 1 {
		t.Fatalf("sync_blobs rows %d %v", n, err)
	}

	if c := newBlobChecker(nil); c != nil {
		t.Fatalf("checker without the use case = %#v, want nil (every blob_ref refused)", c)
	}
	if s, err := NewBlobService(BlobServiceParams{Config: cfg, Log: log, Store: memory.New()}); s != nil || err != nil {
		t.Fatalf("use case without a store = %v %v", s, err)
	}
}

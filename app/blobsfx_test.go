package app

import (
	"testing"

	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/blobs/memblob"
	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/config"
)

func TestNewBlobStore(t *testing.T) {
	lc := fxtest.NewLifecycle(t)
	log := zap.NewNop()
	cfg := config.Default()
	for _, tc := range []struct {
		name    string
		store   string
		storage bool
		want    string // "nil", "memblob" or "error"
	}{
		{"without storage", config.BlobStoreDB, false, "nil"},
		{"none", config.BlobStoreNone, true, "nil"},
		{"db", config.BlobStoreDB, true, "memblob"},
		{"fs not in this build", config.BlobStoreFS, true, "error"},
		{"s3 not in this build", config.BlobStoreS3, true, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Blobs.Store = tc.store
			p := BlobStoreParams{Config: c, Log: log}
			if tc.storage {
				p.Store = memory.New()
			}
			s, err := NewBlobStore(lc, p)
			switch tc.want {
			case "nil":
				if s != nil || err != nil {
					t.Fatalf("got %T %v", s, err)
				}
			case "memblob":
				if _, ok := s.(*memblob.Store); !ok || err != nil {
					t.Fatalf("got %T %v", s, err)
				}
			default:
				if err == nil {
					t.Fatalf("got %T, want an error", s)
				}
			}
		})
	}
	if c := newBlobChecker(nil); c != nil {
		t.Fatalf("checker without the use case = %#v, want nil (every blob_ref refused)", c)
	}
	if s, err := NewBlobService(BlobServiceParams{Config: cfg, Log: log, Store: memory.New()}); s != nil || err != nil {
		t.Fatalf("use case without a store = %v %v", s, err)
	}
}

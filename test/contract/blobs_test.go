package contract_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/blobs/fsblob"
	"github.com/syncd-dev/syncd/adapters/blobs/memblob"
	"github.com/syncd-dev/syncd/adapters/blobs/s3blob"
	"github.com/syncd-dev/syncd/adapters/blobs/sqlblob"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/contract"
	"github.com/syncd-dev/syncd/test/fakes3"
	"github.com/syncd-dev/syncd/test/pgtest"
)

// sqlBlobChunk is smaller than the default so the suite's blobs span many
// chunks and its ranges cross chunk boundaries.
const sqlBlobChunk = 256 << 10

// blobOpener opens one kind of store at a location (a database file or
// DSN, a directory, a fake server's bucket).
type blobOpener struct {
	fresh func(t testing.TB) string
	open  func(t testing.TB, loc string) ports.BlobStore
}

// blobOpeners are the stores the contract tests run against, the
// database ones with sqlChunk-byte chunks; the benchmarks share them.
func blobOpeners(sqlChunk int) map[string]blobOpener {
	return map[string]blobOpener{
		"SQLite": {
			fresh: func(t testing.TB) string { return filepath.Join(t.TempDir(), "sync.db") },
			open: func(t testing.TB, path string) ports.BlobStore {
				st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				s, err := sqlblob.Open(context.Background(), sqlblob.Options{DB: st.DB(), ReadDB: st.ReadDB(), ChunkSize: sqlChunk})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
		},
		"Filesystem": {
			fresh: func(t testing.TB) string { return filepath.Join(t.TempDir(), "blobs") },
			open: func(t testing.TB, dir string) ports.BlobStore {
				s, err := fsblob.Open(fsblob.Options{Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
		},
		"S3": {
			// A location is a fake server's endpoint and a bucket on it.
			fresh: func(t testing.TB) string {
				srv := fakes3.Start(t)
				return srv.URL + " " + srv.Bucket(t, "blobs")
			},
			open: func(t testing.TB, loc string) ports.BlobStore {
				endpoint, bucket, _ := strings.Cut(loc, " ")
				s, err := s3blob.New(s3blob.Options{
					Endpoint: endpoint, Region: fakes3.Region, Bucket: bucket, Prefix: "syncd/",
					AccessKeyID: fakes3.AccessKeyID, SecretAccessKey: fakes3.SecretAccessKey,
					UsePathStyle: true, PartSize: s3blob.MinPartSize,
				})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
		},
		"Postgres": {
			fresh: func(t testing.TB) string { return pgtest.DSN(t) },
			open: func(t testing.TB, dsn string) ports.BlobStore {
				st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				s, err := sqlblob.Open(context.Background(), sqlblob.Options{DB: st.DB(), ReadDB: st.ReadDB(), ChunkSize: sqlChunk})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
		},
	}
}

func TestBlobsMemory(t *testing.T) {
	contract.RunBlobs(t, contract.BlobHarness{New: func(testing.TB) ports.BlobStore { return memblob.New() }})
}
func TestBlobsSQLite(t *testing.T)   { contract.RunBlobs(t, reopenableBlobs("SQLite", sqlBlobChunk)) }
func TestBlobsPostgres(t *testing.T) { contract.RunBlobs(t, reopenableBlobs("Postgres", sqlBlobChunk)) }
func TestBlobsFilesystem(t *testing.T) {
	contract.RunBlobs(t, reopenableBlobs("Filesystem", sqlBlobChunk))
}
func TestBlobsS3(t *testing.T) { contract.RunBlobs(t, reopenableBlobs("S3", sqlBlobChunk)) }

// reopenableBlobs is a harness whose stores open at a fresh location, and
// reopen at the location of the store they stand in for.
func reopenableBlobs(kind string, sqlChunk int) contract.BlobHarness {
	o := blobOpeners(sqlChunk)[kind]
	var mu sync.Mutex
	locs := map[ports.BlobStore]string{}
	openAt := func(t testing.TB, loc string) ports.BlobStore {
		s := o.open(t, loc)
		mu.Lock()
		locs[s] = loc
		mu.Unlock()
		return s
	}
	return contract.BlobHarness{
		New: func(t testing.TB) ports.BlobStore { return openAt(t, o.fresh(t)) },
		Reopen: func(t testing.TB, s ports.BlobStore) ports.BlobStore {
			mu.Lock()
			loc := locs[s]
			mu.Unlock()
			return openAt(t, loc)
		},
	}
}

// BenchmarkBlobs records each store's throughput with its default
// settings: go test ./test/contract -run '^$' -bench Blobs.
func BenchmarkBlobs(b *testing.B) {
	for _, kind := range []string{"SQLite", "Postgres", "Filesystem", "S3"} {
		b.Run(kind, func(b *testing.B) { contract.BenchBlobs(b, reopenableBlobs(kind, sqlblob.DefaultChunkSize)) })
	}
}

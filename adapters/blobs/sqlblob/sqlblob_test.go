package sqlblob_test

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/blobs/sqlblob"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
)

const testChunk = 1 << 10

// engines open a blob store of testChunk-byte chunks on each engine and
// return the raw write handle for inspecting its tables.
var engines = map[string]func(t testing.TB, o sqlblob.Options) (*sqlblob.Store, *sql.DB){
	"sqlite": func(t testing.TB, o sqlblob.Options) (*sqlblob.Store, *sql.DB) {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "sync.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		o.DB, o.ReadDB = st.DB(), st.ReadDB()
		return open(t, o), st.DB().DB
	},
	"postgres": func(t testing.TB, o sqlblob.Options) (*sqlblob.Store, *sql.DB) {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: pgtest.DSN(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		o.DB, o.ReadDB = st.DB(), st.ReadDB()
		return open(t, o), st.DB().DB
	},
}

func open(t testing.TB, o sqlblob.Options) *sqlblob.Store {
	t.Helper()
	if o.ChunkSize == 0 {
		o.ChunkSize = testChunk
	}
	s, err := sqlblob.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func upload(partition string, b []byte, created int64) ports.BlobUpload {
	return ports.BlobUpload{Partition: partition, BlobID: contentaddr.Of(b), ByteLength: int64(len(b)), MaxBytes: 1 << 30, CreatedAtMs: created}
}

func count(t testing.TB, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestChunksAreStoredOnce: a blob is stored in ceil(n/chunk) chunks however
// many Puts raced for it; refused uploads leave neither chunks nor a
// staging row; Delete takes the chunks with it.
func TestChunksAreStoredOnce(t *testing.T) {
	for name, openEngine := range engines {
		t.Run(name, func(t *testing.T) {
			s, db := openEngine(t, sqlblob.Options{})
			ctx := context.Background()
			b := randomBytes(1, 10*testChunk+5)
			const racers = 6
			var wg sync.WaitGroup
			created := make(chan bool, racers)
			for range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, c, err := s.Put(ctx, upload("p", b, 1), bytes.NewReader(b))
					if err != nil {
						t.Error(err)
					}
					created <- c
				}()
			}
			wg.Wait()
			close(created)
			n := 0
			for c := range created {
				if c {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d of %d racing Puts report creating the blob, want exactly 1", n, racers)
			}
			if got := count(t, db, "sync_blob_chunks"); got != 11 {
				t.Fatalf("%d chunks stored for an 11-chunk blob", got)
			}
			// Refused bodies: a wrong byte at the end, a body cut short.
			bad := bytes.Clone(b)
			bad[len(bad)-1]++
			other := upload("p2", b, 1)
			if _, _, err := s.Put(ctx, other, bytes.NewReader(bad)); syncerr.CodeOf(err) != syncerr.BlobHashMismatch {
				t.Fatalf("Put of other bytes: %v", err)
			}
			if _, _, err := s.Put(ctx, other, bytes.NewReader(b[:len(b)-1])); syncerr.CodeOf(err) != syncerr.BlobHashMismatch {
				t.Fatalf("Put of a cut body: %v", err)
			}
			if got := count(t, db, "sync_blob_chunks"); got != 11 {
				t.Fatalf("refused uploads left chunks: %d stored, want 11", got)
			}
			if got := count(t, db, "sync_blob_uploads"); got != 0 {
				t.Fatalf("%d staging rows left", got)
			}
			if err := s.Delete(ctx, "p", other.BlobID); err != nil {
				t.Fatal(err)
			}
			if got := count(t, db, "sync_blob_chunks"); got != 0 {
				t.Fatalf("Delete left %d chunks", got)
			}
		})
	}
}

// TestRangeReadsOnlyItsChunks: a range is served from the chunks it
// covers; the others are never fetched (here they are gone, so touching
// one fails the read).
func TestRangeReadsOnlyItsChunks(t *testing.T) {
	for name, openEngine := range engines {
		t.Run(name, func(t *testing.T) {
			s, db := openEngine(t, sqlblob.Options{})
			ctx := context.Background()
			b := randomBytes(2, 6*testChunk+100)
			u := upload("p", b, 1)
			if _, _, err := s.Put(ctx, u, bytes.NewReader(b)); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("DELETE FROM sync_blob_chunks WHERE seq NOT IN (2, 3)"); err != nil {
				t.Fatal(err)
			}
			read := func(off, n int64) ([]byte, error) {
				rc, _, err := s.Open(ctx, "p", u.BlobID, off, n)
				if err != nil {
					return nil, err
				}
				defer rc.Close()
				return io.ReadAll(rc)
			}
			tests := []struct {
				name    string
				off, n  int64
				wantErr bool
			}{
				{"inside chunk 2", 2*testChunk + 10, 100, false},
				{"across chunks 2 and 3", 3*testChunk - 10, 20, false},
				{"all of chunks 2 and 3", 2 * testChunk, 2 * testChunk, false},
				{"touches chunk 1", 2*testChunk - 1, 2, true},
				{"touches chunk 4", 4*testChunk - 1, 2, true},
			}
			for _, tc := range tests {
				got, err := read(tc.off, tc.n)
				if tc.wantErr {
					if err == nil {
						t.Errorf("%s: read succeeded without its chunks", tc.name)
					}
					continue
				}
				if err != nil || !bytes.Equal(got, b[tc.off:tc.off+tc.n]) {
					t.Errorf("%s: %d bytes, %v", tc.name, len(got), err)
				}
			}
		})
	}
}

// gateReader gives the first n bytes of r, then waits for release before
// giving the rest: an upload that streams slowly.
type gateReader struct {
	r       io.Reader
	n       int
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gateReader) Read(p []byte) (int, error) {
	if g.n <= 0 {
		g.once.Do(func() { close(g.reached) })
		<-g.release
		return g.r.Read(p)
	}
	if len(p) > g.n {
		p = p[:g.n]
	}
	n, err := g.r.Read(p)
	g.n -= n
	return n, err
}

// TestSlowUploadHoldsNoWriter: a Put waiting for its body mid-stream has
// written the chunks it read and holds no transaction and no connection:
// the blob is not yet visible, its staging row and chunks are, and other
// writers (another upload, a delete) finish in the meantime. On SQLite
// this is the one write lock.
func TestSlowUploadHoldsNoWriter(t *testing.T) {
	for name, openEngine := range engines {
		t.Run(name, func(t *testing.T) {
			s, db := openEngine(t, sqlblob.Options{})
			ctx := context.Background()
			slow := randomBytes(3, 8*testChunk)
			g := &gateReader{r: bytes.NewReader(slow), n: 3*testChunk + 1, reached: make(chan struct{}), release: make(chan struct{})}
			done := make(chan error, 1)
			go func() {
				_, _, err := s.Put(ctx, upload("p", slow, 1), g)
				done <- err
			}()
			<-g.reached
			if _, ok, err := s.Stat(ctx, "p", contentaddr.Of(slow)); err != nil || ok {
				t.Fatalf("a blob still streaming is visible (%v)", err)
			}
			if got := count(t, db, "sync_blob_uploads"); got != 1 {
				t.Fatalf("%d staging rows while one upload streams", got)
			}
			// The chunks read so far are written already: a Put buffers one
			// chunk, never the body.
			if got := count(t, db, "sync_blob_chunks"); got != 3 {
				t.Fatalf("%d chunks written after 3 chunks and a byte were read, want 3", got)
			}
			for i := range 3 {
				other := randomBytes(uint64(10+i), 5*testChunk+i)
				if _, created, err := s.Put(ctx, upload("p", other, 1), bytes.NewReader(other)); err != nil || !created {
					t.Fatalf("a second upload beside a slow one: created %v, %v", created, err)
				}
				if err := s.Delete(ctx, "p", contentaddr.Of(other)); err != nil {
					t.Fatal(err)
				}
			}
			close(g.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if _, ok, err := s.Stat(ctx, "p", contentaddr.Of(slow)); err != nil || !ok {
				t.Fatalf("the slow upload is not visible after it ended (%v)", err)
			}
			if got := count(t, db, "sync_blob_uploads"); got != 0 {
				t.Fatalf("%d staging rows after the upload was published", got)
			}
		})
	}
}

// TestStaleUploadsAreSwept: uploads a crashed process staged and never
// published are removed once older than StaleUploadAfter on the app
// clock, as the next Put sees it; younger ones are kept.
func TestStaleUploadsAreSwept(t *testing.T) {
	for name, openEngine := range engines {
		t.Run(name, func(t *testing.T) {
			s, db := openEngine(t, sqlblob.Options{StaleUploadAfter: time.Hour})
			const now = int64(10 * time.Hour / time.Millisecond)
			q := func(query string) string {
				if name == "postgres" {
					return map[string]string{
						"up":    "INSERT INTO sync_blob_uploads(upload_id, started_at_ms) VALUES($1, $2)",
						"chunk": "INSERT INTO sync_blob_chunks(upload_id, seq, bytes) VALUES($1, 0, $2)",
					}[query]
				}
				return map[string]string{
					"up":    "INSERT INTO sync_blob_uploads(upload_id, started_at_ms) VALUES(?, ?)",
					"chunk": "INSERT INTO sync_blob_chunks(upload_id, seq, bytes) VALUES(?, 0, ?)",
				}[query]
			}
			for id, started := range map[string]int64{"crashed": now - 2*3600_000, "running": now - 1000} {
				if _, err := db.Exec(q("up"), id, started); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(q("chunk"), id, []byte("partial")); err != nil {
					t.Fatal(err)
				}
			}
			b := []byte("a later upload")
			if _, _, err := s.Put(context.Background(), upload("p", b, now), bytes.NewReader(b)); err != nil {
				t.Fatal(err)
			}
			var left string
			if err := db.QueryRow("SELECT upload_id FROM sync_blob_uploads").Scan(&left); err != nil || left != "running" {
				t.Fatalf("staging rows after the sweep: %q, %v; want only the running one", left, err)
			}
			if got := count(t, db, "sync_blob_chunks"); got != 2 {
				t.Fatalf("%d chunks after the sweep, want the running upload's and the new blob's", got)
			}
		})
	}
}

func TestOpenRefusesABadChunkSize(t *testing.T) {
	for _, n := range []int{-1, sqlblob.MaxChunkSize + 1} {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "sync.db")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sqlblob.Open(context.Background(), sqlblob.Options{DB: st.DB(), ChunkSize: n}); err == nil {
			t.Errorf("ChunkSize %d accepted", n)
		}
		_ = st.Close()
	}
}

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestSmallTransfersHoldTheirSize: a body declared shorter than a chunk,
// and a range shorter than one, hold buffers of their own size, not a
// whole chunk, as PutBufferBytes and OpenBufferBytes report (the HTTP
// routes reserve those figures on the in-flight body budget).
func TestSmallTransfersHoldTheirSize(t *testing.T) {
	const chunk = 16 << 20
	for name, openEngine := range engines {
		t.Run(name, func(t *testing.T) {
			s, _ := openEngine(t, sqlblob.Options{ChunkSize: chunk})
			ctx := context.Background()
			b := randomBytes(7, 100)
			u := upload("p", b, 1)
			if got := s.PutBufferBytes(u); got != 200 {
				t.Fatalf("PutBufferBytes of 100 bytes: %d", got)
			}
			if got := s.PutBufferBytes(ports.BlobUpload{ByteLength: -1}); got != 2*chunk {
				t.Fatalf("PutBufferBytes of an unknown length: %d", got)
			}
			if got := s.OpenBufferBytes(ports.BlobInfo{ByteLength: 100}, 100); got != 200 {
				t.Fatalf("OpenBufferBytes of 100 bytes: %d", got)
			}
			// Driver and statement allocations are a few KiB; a chunk
			// buffer is 16 MiB.
			const bound = 4 << 20
			if n := allocated(func() {
				if _, _, err := s.Put(ctx, u, bytes.NewReader(b)); err != nil {
					t.Fatal(err)
				}
			}); n > bound {
				t.Fatalf("a 100-byte Put allocated %d bytes", n)
			}
			var got []byte
			if n := allocated(func() {
				rc, _, err := s.Open(ctx, "p", u.BlobID, 0, -1)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = rc.Close() }()
				if got, err = io.ReadAll(rc); err != nil {
					t.Fatal(err)
				}
			}); n > bound {
				t.Fatalf("a 100-byte read allocated %d bytes", n)
			}
			if !bytes.Equal(got, b) {
				t.Fatal("read back other bytes")
			}
		})
	}
}

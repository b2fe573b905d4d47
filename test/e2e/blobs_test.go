package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/adapters/blobs/sqlblob"
	"github.com/syncd-dev/syncd/app/blobs"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

// blobIR is an app with attachments: a blob_ref column on a table scoped
// by project, so a download is authorized by the row that references it.
const blobIR = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{ "version": 1, "migrations": ["0001"] }],
  "tables": [
    { "name": "attachments", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false },
                   { "name": "project", "type": "string", "nullable": false },
                   { "name": "title", "type": "string", "nullable": false },
                   { "name": "file", "type": "blob_ref", "nullable": true } ],
      "scopes": ["project:{project}"] }
  ],
  "subscriptions": []
}`

// steppedClock is a wall clock moved on by the test.
type steppedClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *steppedClock) step(d time.Duration) { c.mu.Lock(); c.off += d; c.mu.Unlock() }

func (*steppedClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type blobServer struct {
	*server
	base  string
	svc   *blobs.Service
	store ports.BlobStore
}

func startBlobs(t *testing.T, e engine, clk platform.Clock, cfg func(*config.Config), more ...fx.Option) *blobServer {
	t.Helper()
	bs := &blobServer{}
	// The harness wraps the engine, which hides its database handles from
	// the blob store's wiring: the database store is opened over them here.
	var once sync.Once
	deco := fx.Decorate(func(st ports.Storage, _ ports.BlobStore) (ports.BlobStore, error) {
		var err error
		once.Do(func() {
			h, ok := st.(*gatedStore).Storage.(interface {
				DB() *bun.DB
				ReadDB() *bun.DB
			})
			if !ok {
				err = fmt.Errorf("engine %s exposes no database handles", e.name)
				return
			}
			bs.store, err = sqlblob.Open(context.Background(), sqlblob.Options{DB: h.DB(), ReadDB: h.ReadDB()})
		})
		return bs.store, err
	})
	extra := append([]fx.Option{deco, fx.Populate(&bs.svc)}, more...)
	if clk != nil {
		extra = append(extra, fx.Decorate(func(platform.Clock) platform.Clock { return clk }))
	}
	bs.server = start(t, e, serverOpts{ir: []byte(blobIR), extra: extra, config: func(c *config.Config) {
		c.Blobs.MaxBytes = 1 << 20
		c.Blobs.SweepInterval = 0 // the test sweeps itself
		if cfg != nil {
			cfg(c)
		}
	}})
	bs.base = strings.TrimSuffix(bs.url, "/sync")
	if _, ok := bs.store.(*sqlblob.Store); !ok {
		t.Fatalf("blob store %T, want the database store", bs.store)
	}
	return bs
}

// member is a client of the blob server acting for actor in partition
// "att", granted projects.
func (s *blobServer) member(t *testing.T, actor string, projects ...string) *client.Client {
	t.Helper()
	h := http.Header{}
	h.Set("X-Syncd-Actor", actor)
	h.Set("X-Syncd-Partition", "att")
	h.Set("X-Syncd-Scopes", `{"project":["`+strings.Join(projects, `","`)+`"]}`)
	c, err := client.New(client.Options{BaseURL: s.base, Schema: s.sch, ClientID: "c-" + actor, Header: h})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pushed is a commit's outcome: its status and the first operation code.
type pushed struct {
	Status ssp2.PushStatus
	Code   string
}

// attach queues and pushes a row of project referencing ref (nil: none)
// and returns the commit's outcome.
func attach(t *testing.T, c *client.Client, id, project string, ref *client.BlobRef) pushed {
	t.Helper()
	file := rowcodec.Null()
	if ref != nil {
		file = ref.Value()
	}
	op, err := c.Upsert("attachments", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "project": rowcodec.String(project),
		"title": rowcodec.String("attachment " + id), "file": file}, -1)
	if err != nil {
		t.Fatal(err)
	}
	commitID := c.Queue(op)
	res, err := c.Push(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Pushes {
		if p.ClientCommitID == commitID {
			out := pushed{Status: p.Status}
			for _, r := range p.Results {
				if r.Code != "" {
					out.Code = r.Code
					break
				}
			}
			return out
		}
	}
	t.Fatalf("no result for %s in %+v", commitID, res.Pushes)
	return pushed{}
}

func wantHTTPCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	he, ok := err.(*client.HTTPError)
	if !ok || he.Status != status || he.Code != code {
		t.Fatalf("err = %v, want %d %s", err, status, code)
	}
}

// TestBlobsEndToEnd: a schema with a blob_ref column through the Go
// client: upload, reference in a push, download by another actor who sees
// the row, refusal for one who does not; the push-time existence check;
// and the blob GC (the orphan sweep) after the grace period.
func TestBlobsEndToEnd(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		clk := &steppedClock{}
		s := startBlobs(t, e, clk, nil)
		ctx := context.Background()
		author, reader, outsider := s.member(t, "author", "p1"), s.member(t, "reader", "p1"), s.member(t, "outsider", "p2")
		for _, c := range []*client.Client{author, reader, outsider} {
			if err := c.AcquireEpoch(ctx); err != nil {
				t.Fatal(err)
			}
		}

		// Upload (bytes, and streamed from a seekable reader), reference.
		doc := bytes.Repeat([]byte("attached document "), 4096)
		ref, err := author.UploadBlob(ctx, doc, "text/plain")
		if err != nil {
			t.Fatal(err)
		}
		ref.Name = "doc.txt"
		pic := bytes.Repeat([]byte{0xff, 0xd8, 0x00}, 1000)
		picRef, err := author.UploadBlobFrom(ctx, bytes.NewReader(pic), "image/jpeg")
		if err != nil || picRef.BlobID != contentaddr.Of(pic) || picRef.ByteLength != int64(len(pic)) {
			t.Fatalf("streamed upload %+v %v", picRef, err)
		}
		if _, err := author.UploadBlob(ctx, doc, "text/plain"); err != nil {
			t.Fatalf("idempotent upload: %v", err)
		}
		if r := attach(t, author, "a1", "p1", &ref); r.Status != ssp2.PushApplied {
			t.Fatalf("push with an uploaded blob: %+v", r)
		}
		if r := attach(t, author, "a2", "p1", &picRef); r.Status != ssp2.PushApplied {
			t.Fatalf("push with a streamed blob: %+v", r)
		}
		missing := client.BlobRef{BlobID: contentaddr.Of([]byte("never uploaded")), ByteLength: 14}
		if r := attach(t, author, "a3", "p1", &missing); r.Status != ssp2.PushRejected || r.Code != "blob.not_found" {
			t.Fatalf("push with an absent blob: %+v", r)
		}

		// The reader pulls the row and downloads what it references.
		reader.Subscribe("att", "attachments", map[string][]string{"project": {"p1"}})
		if _, err := reader.PullUntilIdle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		vals, _, ok := reader.Get("attachments", "a1")
		if !ok {
			t.Fatalf("reader has rows %v", reader.RowIDs("attachments"))
		}
		got, err := rowcodec.ParseBlobRef(vals["file"].Raw())
		if err != nil || got.BlobID != ref.BlobID || got.Name != "doc.txt" {
			t.Fatalf("pulled blob_ref %+v %v", got, err)
		}
		b, err := reader.DownloadBlob(ctx, got.BlobID)
		if err != nil || !bytes.Equal(b, doc) {
			t.Fatalf("reader download: %d bytes, %v", len(b), err)
		}
		part, err := reader.DownloadBlobRange(ctx, got.BlobID, 9, 8)
		if err != nil || string(part) != "document" {
			t.Fatalf("range %q %v", part, err)
		}

		// Refusals: an actor who does not see the row, an unknown blob,
		// bytes that are not the id's, a blob over the cap.
		_, err = outsider.DownloadBlob(ctx, ref.BlobID)
		wantHTTPCode(t, err, 403, "blob.forbidden")
		_, err = reader.DownloadBlob(ctx, missing.BlobID)
		wantHTTPCode(t, err, 404, "blob.not_found")
		req, _ := http.NewRequest(http.MethodPut, s.base+"/blobs/"+contentaddr.Of([]byte("claimed")), strings.NewReader("other bytes"))
		req.Header.Set("X-Syncd-Actor", "author")
		req.Header.Set("X-Syncd-Partition", "att")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
			t.Fatalf("hash mismatch: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		_, err = author.UploadBlob(ctx, make([]byte, 1<<20+1), "")
		wantHTTPCode(t, err, 413, "blob.too_large")

		// The blob GC: an orphan past the grace period goes, referenced
		// blobs stay; the orphan is then absent to a push, until uploaded
		// again.
		orphan := []byte("uploaded, never referenced")
		orphanRef, err := author.UploadBlob(ctx, orphan, "")
		if err != nil {
			t.Fatal(err)
		}
		clk.step(config.DefaultBlobs().OrphanGrace - time.Minute)
		young, err := author.UploadBlob(ctx, []byte("uploaded just before the sweep"), "")
		if err != nil {
			t.Fatal(err)
		}
		clk.step(time.Minute + time.Millisecond)
		res, err := s.svc.CollectAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		deleted := 0
		for _, r := range res {
			deleted += r.Deleted
		}
		if deleted != 1 {
			t.Fatalf("sweep %+v, want the one orphan deleted", res)
		}
		for id, want := range map[string]bool{orphanRef.BlobID: false, ref.BlobID: true, picRef.BlobID: true, young.BlobID: true} {
			if _, ok, err := s.store.Stat(ctx, "att", id); err != nil || ok != want {
				t.Fatalf("blob %s stored %v (%v), want %v", id, ok, err, want)
			}
		}
		if r := attach(t, author, "a4", "p1", &orphanRef); r.Status != ssp2.PushRejected || r.Code != "blob.not_found" {
			t.Fatalf("push with the swept orphan: %+v", r)
		}
		if _, err := author.UploadBlob(ctx, orphan, ""); err != nil {
			t.Fatal(err)
		}
		if r := attach(t, author, "a5", "p1", &orphanRef); r.Status != ssp2.PushApplied {
			t.Fatalf("push after the upload again: %+v", r)
		}
		if b, err := reader.DownloadBlob(ctx, ref.BlobID); err != nil || !bytes.Equal(b, doc) {
			t.Fatalf("referenced blob after the sweep: %v", err)
		}
	})
}

// TestBlobsPresignedEndToEnd: with --blob-presign the server answers a
// download and an upload grant with native presigned URLs under
// --public-url, which the client follows without host authentication.
func TestBlobsPresignedEndToEnd(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		keyFile := filepath.Join(t.TempDir(), "url.key")
		if err := os.WriteFile(keyFile, bytes.Repeat([]byte("blobkey!"), 4), 0o600); err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		s := startBlobs(t, e, nil, func(c *config.Config) {
			c.Listen = addr
			c.Segments.SignedURLKeyFile, c.Segments.PublicURL = keyFile, "http://"+addr
			c.Blobs.Presign = true
		})
		ctx := context.Background()
		author, reader, outsider := s.member(t, "author", "p1"), s.member(t, "reader", "p1"), s.member(t, "outsider", "p2")
		data := []byte("direct to the object route")
		ref, how, err := author.UploadBlobWithGrant(ctx, data, "text/plain")
		if err != nil || how != client.GrantURL {
			t.Fatalf("granted upload %s %v", how, err)
		}
		if _, how, err := author.UploadBlobWithGrant(ctx, data, "text/plain"); err != nil || how != client.GrantPresent {
			t.Fatalf("second grant %s %v", how, err)
		}
		if err := author.AcquireEpoch(ctx); err != nil {
			t.Fatal(err)
		}
		if r := attach(t, author, "a1", "p1", &ref); r.Status != ssp2.PushApplied {
			t.Fatalf("push with the granted blob: %+v", r)
		}
		b, err := reader.DownloadBlob(ctx, ref.BlobID)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("presigned download %q %v", b, err)
		}
		if st := reader.Stats(); st.BlobDownloads != 1 || st.BlobURLFetches != 1 {
			t.Fatalf("reader stats %+v: the bytes should come from the URL", st)
		}
		_, err = outsider.DownloadBlob(ctx, ref.BlobID)
		wantHTTPCode(t, err, 403, "blob.forbidden")
		// The object route is the URL's alone: without its grant it refuses.
		resp, err := http.Get(s.base + "/blob-objects/" + ref.BlobID + "?op=get")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Fatalf("object route without a grant: %d", resp.StatusCode)
		}
	})
}

// grant asks for an upload grant of blobID as actor of partition and
// returns the answer's body.
func grant(t *testing.T, s *blobServer, actor, partition, blobID string, n int) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.base+"/blobs/"+blobID+"/upload-grant", strings.NewReader(fmt.Sprintf(`{"byteLength":%d}`, n)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Syncd-Actor", actor)
	req.Header.Set("X-Syncd-Partition", partition)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := new(bytes.Buffer)
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("grant: %d %s", resp.StatusCode, b)
	}
	return strings.TrimSpace(b.String())
}

// TestBlobIDRevealsWithinItsPartition pins what a blob id gives an actor
// who learns it without the bytes (SPEC §5.9.3, §5.9.5, §5.9.6;
// ARCHITECTURE "What a blob id reveals"): inside the blob's partition,
// its existence to anyone authenticated (the upload grant answers
// present, a download 403 rather than 404), and its bytes to anyone who
// may write a row with a blob_ref column, by pushing a row of their own
// that references it. Authorization follows the referencing rows: the
// row's delete takes it away again. Nothing crosses partitions.
func TestBlobIDRevealsWithinItsPartition(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := startBlobs(t, e, nil, nil)
		ctx := context.Background()
		author, outsider := s.member(t, "author", "p1"), s.member(t, "outsider", "p2")
		for _, c := range []*client.Client{author, outsider} {
			if err := c.AcquireEpoch(ctx); err != nil {
				t.Fatal(err)
			}
		}
		secret := []byte("the author's attachment, in a project the outsider cannot see")
		ref, err := author.UploadBlob(ctx, secret, "text/plain")
		if err != nil {
			t.Fatal(err)
		}
		if r := attach(t, author, "a1", "p1", &ref); r.Status != ssp2.PushApplied {
			t.Fatalf("author's push: %+v", r)
		}

		// The id alone: existence, not the bytes.
		_, err = outsider.DownloadBlob(ctx, ref.BlobID)
		wantHTTPCode(t, err, 403, "blob.forbidden")
		if g := grant(t, s, "outsider", "att", ref.BlobID, len(secret)); g != `{"present":true}` {
			t.Fatalf("outsider's grant %s: want the blob's presence", g)
		}
		unknown := contentaddr.Of([]byte("nobody uploaded this"))
		if g := grant(t, s, "outsider", "att", unknown, 20); g != `{}` {
			t.Fatalf("grant of an unknown blob %s", g)
		}
		_, err = outsider.DownloadBlob(ctx, unknown)
		wantHTTPCode(t, err, 404, "blob.not_found")

		// A row of the outsider's own referencing it: the bytes.
		if r := attach(t, outsider, "o1", "p2", &ref); r.Status != ssp2.PushApplied {
			t.Fatalf("outsider's push referencing the author's blob: %+v", r)
		}
		if b, err := outsider.DownloadBlob(ctx, ref.BlobID); err != nil || !bytes.Equal(b, secret) {
			t.Fatalf("outsider's download after its push: %q %v", b, err)
		}
		outsider.Queue(outsider.Delete("attachments", "o1", -1))
		if _, err := outsider.Push(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = outsider.DownloadBlob(ctx, ref.BlobID)
		wantHTTPCode(t, err, 403, "blob.forbidden")

		// Another partition: the same id is unknown there.
		h := http.Header{}
		h.Set("X-Syncd-Actor", "stranger")
		h.Set("X-Syncd-Partition", "elsewhere")
		h.Set("X-Syncd-Scopes", `{"project":["p1","p2"]}`)
		stranger, err := client.New(client.Options{BaseURL: s.base, Schema: s.sch, ClientID: "c-stranger", Header: h})
		if err != nil {
			t.Fatal(err)
		}
		if err := stranger.AcquireEpoch(ctx); err != nil {
			t.Fatal(err)
		}
		if g := grant(t, s, "stranger", "elsewhere", ref.BlobID, len(secret)); g != `{}` {
			t.Fatalf("grant in another partition %s", g)
		}
		_, err = stranger.DownloadBlob(ctx, ref.BlobID)
		wantHTTPCode(t, err, 404, "blob.not_found")
		if r := attach(t, stranger, "s1", "p1", &ref); r.Status != ssp2.PushRejected || r.Code != "blob.not_found" {
			t.Fatalf("push in another partition referencing the blob: %+v", r)
		}
	})
}

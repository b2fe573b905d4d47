package segments

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/ports"
)

// images starts images that record the rows added to them; an image's
// bytes are its rows' payloads in order.
type images struct {
	mu      sync.Mutex
	started int
	req     ports.ImageRequest
	added   []commit.Row
	// addErr, when set, fails every Add.
	addErr error
	// release, when set, holds every NewImage until closed.
	release chan struct{}
}

func (im *images) NewImage(_ context.Context, r ports.ImageRequest) (ports.ImageWriter, error) {
	im.mu.Lock()
	im.started++
	im.req, im.added = r, nil
	im.mu.Unlock()
	if im.release != nil {
		<-im.release
	}
	return &image{im: im}, nil
}

func (im *images) builds() int {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.started
}

type image struct {
	im *images
	b  []byte
	n  int64
}

func (w *image) Add(_ context.Context, version int64, payload []byte) error {
	if w.im.addErr != nil {
		return w.im.addErr
	}
	w.im.mu.Lock()
	w.im.added = append(w.im.added, commit.Row{Version: version, Payload: bytes.Clone(payload)})
	w.im.mu.Unlock()
	w.b = append(w.b, payload...)
	w.n++
	return nil
}

func (w *image) Finish(context.Context) ([]byte, int64, error) { return w.b, w.n, nil }
func (w *image) Abort()                                        {}

func withImages(im *images) func(*BuildOptions) {
	return func(o *BuildOptions) { o.Images = im }
}

func (e *buildEnv) request(pageSize int) ImageRequest {
	return ImageRequest{Key: key(ports.SegmentSQLite, 7), Table: e.tbl, Filter: map[string][]string{"owner": {"alice"}}, PageSize: pageSize}
}

func (e *buildEnv) image(t *testing.T, pageSize int) Image {
	t.Helper()
	img, err := e.b.Image(context.Background(), e.request(pageSize))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// §5.3: an image is written from keyset batches (the next scanned while
// the current one is written), every row once in row-id order, stored
// under its content address with one publication of its key, and reused
// from the store afterwards.
func TestImageBuiltFromBatchesAndReused(t *testing.T) {
	im := &images{}
	e := newBuildEnv(t, 16, func(o *BuildOptions) {
		o.Images = im
		o.ImageScanRows = 3
	})
	img := e.image(t, 2)
	if !img.Found || img.FirstPage != nil {
		t.Fatalf("not built: %+v", img)
	}
	if len(im.added) != 16 {
		t.Fatalf("%d rows added, want 16", len(im.added))
	}
	var all []byte
	for i, r := range im.added {
		if want := e.snap.rows[i]; r.Version != want.Version || !bytes.Equal(r.Payload, want.Payload) {
			t.Fatalf("row %d: version %d, want %s at %d", i, r.Version, want.RowID, want.Version)
		}
		all = append(all, r.Payload...)
	}
	k := key(ports.SegmentSQLite, 7)
	if im.req != (ports.ImageRequest{Table: e.tbl, SchemaVersion: k.SchemaVersion, AsOfCommitSeq: k.AsOfCommitSeq, ScopeDigest: k.ScopeDigest}) {
		t.Fatalf("image request %+v", im.req)
	}
	pub := img.Publication
	if pub.SegmentKey != k || pub.SegmentID != contentaddr.Of(all) || pub.RowCount != 16 || pub.ByteLength != int64(len(all)) {
		t.Fatalf("publication %+v", pub)
	}
	// The first page and one row (3 rows), then batches of 3 rows from
	// p-003 on, the last one short.
	if n := e.snap.scans.Load(); n != 6 {
		t.Fatalf("%d scans, want 6", n)
	}
	again := e.image(t, 2)
	if !again.Found || again.Publication.SegmentID != pub.SegmentID || im.builds() != 1 {
		t.Fatalf("not reused: %+v after %d builds", again, im.builds())
	}
	if e.m.get("image built") != 1 || e.m.get("image reused") != 1 {
		t.Fatalf("counts %v", e.m.n)
	}
}

// §5.3 eligibility: a snapshot within one rows page is declined and its
// rows handed to the rows lane; the answer is remembered for that page
// size only.
func TestImageDeclinesOnePage(t *testing.T) {
	im := &images{}
	e := newBuildEnv(t, 2, withImages(im))
	img := e.image(t, 2)
	if img.Found || len(img.FirstPage) != 2 || img.FirstPage[1].RowID != "p-001" {
		t.Fatalf("declined: %+v", img)
	}
	scans := e.snap.scans.Load()
	if img := e.image(t, 2); img.Found || img.FirstPage != nil || e.snap.scans.Load() != scans {
		t.Fatalf("a remembered decline scanned again: %+v", img)
	}
	if e.m.get("declined one_page") != 1 || im.builds() != 0 {
		t.Fatalf("counts %v, %d builds", e.m.n, im.builds())
	}
	if img := e.image(t, 1); !img.Found {
		t.Fatal("a smaller page does not take the image")
	}
}

// A row holding a value no image cell holds exactly declines the key
// whatever the page size, once; a failing builder declines only the
// bootstrap at hand, and the next one tries again.
func TestImageDeclines(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		err          error
		declines     int
	}{
		{"unrepresentable", "unrepresentable", fmt.Errorf("score: %w", sqliteimage.ErrUnrepresentable), 1},
		{"build failed", "build_failed", errors.New("disk full"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := &images{addErr: tc.err}
			e := newBuildEnv(t, 5, withImages(im))
			for _, pageSize := range []int{2, 3} {
				if img := e.image(t, pageSize); img.Found || img.FirstPage != nil {
					t.Fatalf("page size %d: %+v", pageSize, img)
				}
			}
			if n := e.m.get("declined " + tc.reason); n != tc.declines || im.builds() != tc.declines {
				t.Fatalf("%d declines, %d builds, want %d", n, im.builds(), tc.declines)
			}
		})
	}
}

// Without a builder an image another node stored under the key is found,
// and nothing is scanned or built otherwise; without a segment store
// there is no image.
func TestImageWithoutBuilder(t *testing.T) {
	e := newBuildEnv(t, 5, nil)
	if img := e.image(t, 2); img.Found || e.snap.scans.Load() != 0 {
		t.Fatalf("no builder: %+v after %d scans", img, e.snap.scans.Load())
	}
	b := []byte("stored by another node")
	now := time.Now().UnixMilli()
	pub, err := e.segs.Put(context.Background(), b, ports.SegmentPublication{SegmentKey: key(ports.SegmentSQLite, 7), SegmentID: contentaddr.Of(b),
		RowCount: 5, CreatedAtMs: now, ExpiresAtMs: now + 60_000})
	if err != nil {
		t.Fatal(err)
	}
	if img := e.image(t, 2); !img.Found || img.Publication.SegmentID != pub.SegmentID {
		t.Fatalf("stored image not found: %+v", img)
	}
	e = newBuildEnv(t, 5, func(o *BuildOptions) { o.Images, o.Segments = &images{}, nil })
	if img := e.image(t, 2); img.Found || e.snap.scans.Load() != 0 {
		t.Fatalf("no segment store: %+v after %d scans", img, e.snap.scans.Load())
	}
}

// missCounter counts the lookups that find nothing.
type missCounter struct {
	Publisher
	misses atomic.Int32
}

func (m *missCounter) Find(ctx context.Context, k ports.SegmentKey, nowMs int64) (ports.SegmentPublication, bool, error) {
	pub, ok, err := m.Publisher.Find(ctx, k, nowMs)
	if !ok {
		m.misses.Add(1)
	}
	return pub, ok, err
}

// A storm of requests for one image builds it once: the others wait for
// the leader and find what it stored.
func TestImageBuiltOnceUnderStorm(t *testing.T) {
	im := &images{release: make(chan struct{})}
	finds := &missCounter{}
	e := newBuildEnv(t, 50, func(o *BuildOptions) {
		o.Images = im
		finds.Publisher = o.Segments
		o.Segments = finds
	})
	const n = 8
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			img, err := e.b.Image(context.Background(), e.request(2))
			ids[i], errs[i] = img.Publication.SegmentID, err
		}()
	}
	// The leader missed twice (before and after joining), every other
	// request once before waiting on it.
	for deadline := time.Now().Add(10 * time.Second); finds.misses.Load() < n+1 || im.builds() == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d misses, %d builds", finds.misses.Load(), im.builds())
		}
		time.Sleep(time.Millisecond)
	}
	close(im.release)
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] == "" || ids[i] != ids[0] {
			t.Fatalf("request %d: %q %v", i, ids[i], errs[i])
		}
	}
	if im.builds() != 1 || e.m.get("image built") != 1 {
		t.Fatalf("%d builds", im.builds())
	}
}

// §4.7 scope pin: the newest change carrying a value of the first scope
// variable (keys sorted), raised to the horizon and capped at maxSeq; the
// log's end without a scope.
func TestScopePin(t *testing.T) {
	e := newBuildEnv(t, 0, nil)
	ctx := context.Background()
	bounds := ports.LogBounds{HorizonSeq: 4, MaxSeq: 9}
	filter := map[string][]string{"project_id": {"x"}, "owner": {"alice", "bob"}}
	for _, tc := range []struct{ latest, want int64 }{{6, 6}, {2, 4}, {12, 9}} {
		e.snap.pin = tc.latest
		pin, err := e.b.ScopePin(ctx, "p1", "projects", filter, bounds)
		if err != nil || pin != tc.want {
			t.Fatalf("latest %d: pin %d %v, want %d", tc.latest, pin, err, tc.want)
		}
	}
	if q := e.snap.pinQuery; q.Table != "projects" || q.Variable != "owner" || len(q.Values) != 2 || q.ThroughSeq != 9 {
		t.Fatalf("query %+v", q)
	}
	if pin, err := e.b.ScopePin(ctx, "p1", "projects", nil, bounds); err != nil || pin != 9 {
		t.Fatalf("no scope: pin %d %v", pin, err)
	}
}

package contract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// SegmentHarness adapts one segment store implementation to the segment
// suite.
type SegmentHarness struct {
	// New returns a fresh, empty store; the harness releases it.
	New func(t *testing.T) ports.SegmentStore
	// Reopen, when set, opens a second store over s's data the way a
	// restarted process would (persistent stores only).
	Reopen func(t *testing.T, s ports.SegmentStore) ports.SegmentStore
}

// RunSegments runs the segment store contract (SPEC §5.1) against h.
func RunSegments(t *testing.T, h SegmentHarness) {
	if h.New == nil {
		t.Fatal("contract: SegmentHarness.New is required")
	}
	cases := []struct {
		name string
		run  func(t *testing.T, h SegmentHarness)
	}{
		{"put_open_roundtrip", segPutOpen},
		{"id_must_be_content_address", segIDMismatch},
		{"one_entry_many_publications", segManyPublications},
		{"republish_merges_own_lifetime", segRepublish},
		{"find_exact_key", segFind},
		{"find_newest_of_rebuilds", segFindNewest},
		{"unknown", segUnknown},
		{"sweep", segSweep},
		{"stats", segStats},
		{"concurrent_publishers", segConcurrent},
		{"large_segment", segLarge},
		{"reopen", segReopen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

func segKey(partition, digest string) ports.SegmentKey {
	return ports.SegmentKey{
		Partition: partition, LogEpoch: "epoch-1", Table: "tasks", SchemaVersion: 3,
		MediaType: ports.SegmentRows, ScopeDigest: digest, AsOfCommitSeq: 42, PageSize: 1000,
	}
}

func segPub(b []byte, k ports.SegmentKey, created, expires int64) ports.SegmentPublication {
	return ports.SegmentPublication{
		SegmentKey: k, SegmentID: contentaddr.Of(b), NextRowCursor: "row-9", RowCount: 9,
		ByteLength: int64(len(b)), CreatedAtMs: created, ExpiresAtMs: expires,
	}
}

func segRead(t *testing.T, s ports.SegmentStore, id string) []byte {
	t.Helper()
	rc, size, err := s.Open(context.Background(), id)
	if err != nil {
		t.Fatalf("Open(%s): %v", id, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != size {
		t.Fatalf("Open size %d, read %d bytes", size, len(b))
	}
	return b
}

func segMustPut(t *testing.T, s ports.SegmentStore, b []byte, p ports.SegmentPublication) ports.SegmentPublication {
	t.Helper()
	got, err := s.Put(context.Background(), b, p)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return got
}

func segPubs(t *testing.T, s ports.SegmentStore, id string) []ports.SegmentPublication {
	t.Helper()
	ps, err := s.Publications(context.Background(), id)
	if err != nil {
		t.Fatalf("Publications: %v", err)
	}
	return ps
}

func segPutOpen(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	b := []byte("SSG2 segment bytes")
	p := segPub(b, segKey("p1", "d1"), 1000, 5000)
	p.ByteLength = 0 // the store records the real length
	got := segMustPut(t, s, b, p)
	p.ByteLength = int64(len(b))
	if got != p {
		t.Fatalf("Put returned %+v, want %+v", got, p)
	}
	if r := segRead(t, s, p.SegmentID); !bytes.Equal(r, b) {
		t.Fatalf("Open = %q", r)
	}
	ps := segPubs(t, s, p.SegmentID)
	if len(ps) != 1 || ps[0] != p {
		t.Fatalf("Publications = %+v", ps)
	}
}

func segIDMismatch(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	p := segPub([]byte("a"), segKey("p1", "d1"), 1, 2)
	if _, err := s.Put(context.Background(), []byte("b"), p); !errors.Is(err, ports.ErrSegmentIDMismatch) {
		t.Fatalf("Put with a foreign id: %v, want ErrSegmentIDMismatch", err)
	}
	if ps := segPubs(t, s, p.SegmentID); len(ps) != 0 {
		t.Fatalf("refused Put recorded %+v", ps)
	}
}

func segManyPublications(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	b := []byte("identical rows under two scopes")
	a := segMustPut(t, s, b, segPub(b, segKey("p1", "digest-a"), 1000, 5000))
	c := segMustPut(t, s, b, segPub(b, segKey("p1", "digest-b"), 2000, 6000))
	d := segMustPut(t, s, b, segPub(b, segKey("p2", "digest-a"), 3000, 7000))
	ps := segPubs(t, s, a.SegmentID)
	if len(ps) != 3 || ps[0] != a || ps[1] != c || ps[2] != d {
		t.Fatalf("Publications = %+v", ps)
	}
}

func segRepublish(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	b := []byte("republished")
	other := segMustPut(t, s, b, segPub(b, segKey("p1", "other"), 500, 3000))
	segMustPut(t, s, b, segPub(b, segKey("p1", "d"), 1000, 5000))
	// A refresh with a later expiry extends its own publication only.
	p := segPub(b, segKey("p1", "d"), 4000, 9000)
	got := segMustPut(t, s, b, p)
	if got.CreatedAtMs != 1000 || got.ExpiresAtMs != 9000 {
		t.Fatalf("merged = %+v, want created 1000 expires 9000", got)
	}
	// An earlier expiry never shortens it.
	got = segMustPut(t, s, b, segPub(b, segKey("p1", "d"), 4500, 6000))
	if got.ExpiresAtMs != 9000 {
		t.Fatalf("merged expiry %d, want 9000", got.ExpiresAtMs)
	}
	ps := segPubs(t, s, got.SegmentID)
	if len(ps) != 2 || ps[0] != other {
		t.Fatalf("Publications = %+v (other changed?)", ps)
	}
}

func segFind(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	ctx := context.Background()
	b := []byte("page one")
	k := segKey("p1", "d")
	p := segMustPut(t, s, b, segPub(b, k, 1000, 5000))
	got, ok, err := s.Find(ctx, k, 4999)
	if err != nil || !ok || got != p {
		t.Fatalf("Find = %+v %v %v", got, ok, err)
	}
	if _, ok, _ := s.Find(ctx, k, 5000); ok {
		t.Fatal("Find returned an expired publication")
	}
	variants := map[string]func(k *ports.SegmentKey){
		"partition": func(k *ports.SegmentKey) { k.Partition = "p2" },
		"epoch":     func(k *ports.SegmentKey) { k.LogEpoch = "epoch-2" },
		"table":     func(k *ports.SegmentKey) { k.Table = "notes" },
		"schema":    func(k *ports.SegmentKey) { k.SchemaVersion = 4 },
		"media":     func(k *ports.SegmentKey) { k.MediaType = ports.SegmentSQLite },
		"digest":    func(k *ports.SegmentKey) { k.ScopeDigest = "x" },
		"pin":       func(k *ports.SegmentKey) { k.AsOfCommitSeq = 43 },
		"cursor":    func(k *ports.SegmentKey) { k.RowCursor = "row-1" },
		"page":      func(k *ports.SegmentKey) { k.PageSize = 999 },
	}
	for name, mut := range variants {
		k2 := k
		mut(&k2)
		if got, ok, err := s.Find(ctx, k2, 0); err != nil || ok {
			t.Errorf("Find with another %s = %+v %v %v", name, got, ok, err)
		}
	}
}

func segFindNewest(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	k := segKey("p1", "d")
	b1, b2 := []byte("build one"), []byte("build two")
	segMustPut(t, s, b1, segPub(b1, k, 1000, 9000))
	p2 := segMustPut(t, s, b2, segPub(b2, k, 2000, 9000))
	got, ok, err := s.Find(context.Background(), k, 3000)
	if err != nil || !ok || got != p2 {
		t.Fatalf("Find = %+v %v %v, want the newer build", got, ok, err)
	}
}

func segUnknown(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	id := contentaddr.Of([]byte("never stored"))
	if _, _, err := s.Open(context.Background(), id); syncerr.CodeOf(err) != syncerr.NotFound {
		t.Fatalf("Open(unknown) = %v, want sync.not_found", err)
	}
	if _, _, err := s.Open(context.Background(), "../../etc/passwd"); syncerr.CodeOf(err) != syncerr.NotFound {
		t.Fatalf("Open(malformed) = %v, want sync.not_found", err)
	}
	if ps := segPubs(t, s, id); len(ps) != 0 {
		t.Fatalf("Publications(unknown) = %+v", ps)
	}
}

func segSweep(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	ctx := context.Background()
	gone, kept := []byte("all publications expire"), []byte("one publication lives")
	segMustPut(t, s, gone, segPub(gone, segKey("p1", "a"), 1, 100))
	segMustPut(t, s, gone, segPub(gone, segKey("p1", "b"), 1, 200))
	segMustPut(t, s, kept, segPub(kept, segKey("p1", "a"), 1, 100))
	live := segMustPut(t, s, kept, segPub(kept, segKey("p1", "b"), 1, 900))
	res, err := s.Sweep(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	if res != (ports.SegmentSweep{Publications: 3, Segments: 1}) {
		t.Fatalf("Sweep = %+v", res)
	}
	if _, _, err := s.Open(ctx, contentaddr.Of(gone)); syncerr.CodeOf(err) != syncerr.NotFound {
		t.Fatalf("swept segment Open = %v", err)
	}
	if ps := segPubs(t, s, contentaddr.Of(gone)); len(ps) != 0 {
		t.Fatalf("swept publications = %+v", ps)
	}
	if ps := segPubs(t, s, live.SegmentID); len(ps) != 1 || ps[0] != live {
		t.Fatalf("kept publications = %+v", ps)
	}
	if r := segRead(t, s, live.SegmentID); !bytes.Equal(r, kept) {
		t.Fatal("kept bytes changed")
	}
	if res, err := s.Sweep(ctx, 200); err != nil || res != (ports.SegmentSweep{}) {
		t.Fatalf("second Sweep = %+v %v", res, err)
	}
	// A swept segment can be published again.
	segMustPut(t, s, gone, segPub(gone, segKey("p1", "a"), 300, 400))
	if r := segRead(t, s, contentaddr.Of(gone)); !bytes.Equal(r, gone) {
		t.Fatal("republished bytes differ")
	}
}

func segConcurrent(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	b := []byte("raced by many publishers")
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Put(context.Background(), b, segPub(b, segKey("p1", fmt.Sprintf("d%02d", i)), int64(i+1), 1e12))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if ps := segPubs(t, s, contentaddr.Of(b)); len(ps) != n {
		t.Fatalf("%d publications after %d concurrent Puts", len(ps), n)
	}
}

func segLarge(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	b := make([]byte, 3<<20)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	p := segMustPut(t, s, b, segPub(b, segKey("p1", "d"), 1, 2))
	if r := segRead(t, s, p.SegmentID); !bytes.Equal(r, b) {
		t.Fatal("large segment bytes differ")
	}
}

func segReopen(t *testing.T, h SegmentHarness) {
	if h.Reopen == nil {
		t.Skip("store is not persistent")
	}
	s := h.New(t)
	b := []byte("survives a restart")
	p := segMustPut(t, s, b, segPub(b, segKey("p1", "d"), 1000, 5000))
	s2 := h.Reopen(t, s)
	if r := segRead(t, s2, p.SegmentID); !bytes.Equal(r, b) {
		t.Fatal("reopened bytes differ")
	}
	got, ok, err := s2.Find(context.Background(), p.SegmentKey, 2000)
	if err != nil || !ok || got != p {
		t.Fatalf("reopened Find = %+v %v %v", got, ok, err)
	}
}

// segStats: the store's totals count entries once however often they are
// published, their uncompressed bytes, and the publications expired at
// the time asked for; a sweep lowers them.
func segStats(t *testing.T, h SegmentHarness) {
	s := h.New(t)
	sr, ok := s.(ports.SegmentStatsReader)
	if !ok {
		t.Fatalf("%T does not implement ports.SegmentStatsReader", s)
	}
	ctx := context.Background()
	stats := func(nowMs int64) ports.SegmentStats {
		t.Helper()
		st, err := sr.SegmentStats(ctx, nowMs)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if got := stats(0); got != (ports.SegmentStats{}) {
		t.Fatalf("empty store stats = %+v", got)
	}
	a, b := []byte("twelve bytes"), []byte("seven b")
	segMustPut(t, s, a, segPub(a, segKey("p1", "a"), 1, 100))
	segMustPut(t, s, a, segPub(a, segKey("p1", "b"), 1, 300))
	segMustPut(t, s, b, segPub(b, segKey("p2", "a"), 1, 200))
	for _, tc := range []struct {
		now  int64
		want ports.SegmentStats
	}{
		{50, ports.SegmentStats{Segments: 2, Bytes: 19, Publications: 3}},
		{100, ports.SegmentStats{Segments: 2, Bytes: 19, Publications: 3, ExpiredPublications: 1}},
		{300, ports.SegmentStats{Segments: 2, Bytes: 19, Publications: 3, ExpiredPublications: 3}},
	} {
		if got := stats(tc.now); got != tc.want {
			t.Fatalf("stats at %d = %+v, want %+v", tc.now, got, tc.want)
		}
	}
	if _, err := s.Sweep(ctx, 200); err != nil {
		t.Fatal(err)
	}
	if got, want := stats(200), (ports.SegmentStats{Segments: 1, Bytes: 12, Publications: 1}); got != want {
		t.Fatalf("stats after the sweep = %+v, want %+v", got, want)
	}
}

package contract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// BlobHarness adapts one blob store implementation to the blob suite
// (SPEC §5.9). A store joins the suite with one line:
//
//	contract.RunBlobs(t, contract.BlobHarness{New: func(testing.TB) ports.BlobStore { return memblob.New() }})
type BlobHarness struct {
	// New returns a fresh, empty store; the harness releases it.
	New func(t testing.TB) ports.BlobStore
	// Reopen, when set, opens a second store over s's data the way a
	// restarted process (or another node) would (persistent stores only).
	Reopen func(t testing.TB, s ports.BlobStore) ports.BlobStore
}

// RunBlobs runs the blob store contract against h. Groups (test names
// follow them):
//
//   - put, stat, open: the round trip, the stored media type, idempotent
//     re-put (created false without reading the body), unknown and
//     malformed ids;
//   - refusals leave nothing: a body that is not the content address, a
//     body of another length than declared, a body past MaxBytes (judged
//     while streaming), a body cut by its reader or by cancellation;
//   - ranges: start, middle, end, whole, zero length, the empty blob;
//   - partitions: the same id in two partitions is two blobs;
//   - the reads of the blob GC (the orphan sweep): ListCreatedBefore's
//     time bound and paging; Delete, also of an absent blob;
//   - concurrent Puts of one blob; a large blob streamed from a
//     generator; persistence across a reopen.
func RunBlobs(t *testing.T, h BlobHarness) {
	if h.New == nil {
		t.Fatal("contract: BlobHarness.New is required")
	}
	cases := []struct {
		name string
		run  func(t *testing.T, h BlobHarness)
	}{
		{"put_stat_open_roundtrip", blobRoundTrip},
		{"media_type_kept_or_empty", blobMediaType},
		{"reput_is_idempotent_without_reading", blobReput},
		{"unknown_and_malformed_ids", blobUnknown},
		{"hash_mismatch_leaves_nothing", blobHashMismatch},
		{"declared_length_mismatch_leaves_nothing", blobLengthMismatch},
		{"too_large_judged_while_streaming", blobTooLarge},
		{"failed_body_leaves_nothing", blobBodyFails},
		{"range_reads", blobRanges},
		{"empty_blob", blobEmpty},
		{"partition_isolation", blobPartitions},
		{"list_created_before", blobList},
		{"delete", blobDelete},
		{"concurrent_puts_store_once", blobConcurrent},
		{"large_blob_streams", blobLarge},
		{"reopen", blobReopen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

// blobUp is an upload of b with a declared length.
func blobUp(partition string, b []byte, media string, created int64) ports.BlobUpload {
	return ports.BlobUpload{Partition: partition, BlobID: contentaddr.Of(b), MediaType: media,
		ByteLength: int64(len(b)), MaxBytes: 64 << 20, CreatedAtMs: created}
}

// blobBytes are n deterministic pseudo-random bytes.
func blobBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(seedOf(seed)).Read(b)
	return b
}

func seedOf(n uint64) [32]byte {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(n >> (8 * i))
	}
	return s
}

func blobMustPut(t testing.TB, s ports.BlobStore, u ports.BlobUpload, b []byte) ports.BlobInfo {
	t.Helper()
	info, created, err := s.Put(context.Background(), u, bytes.NewReader(b))
	if err != nil {
		t.Fatalf("Put(%s): %v", u.BlobID, err)
	}
	if !created {
		t.Fatalf("Put(%s) of a new blob: created false", u.BlobID)
	}
	return info
}

func blobRead(t testing.TB, s ports.BlobStore, partition, id string, off, n int64) ([]byte, ports.BlobInfo) {
	t.Helper()
	rc, info, err := s.Open(context.Background(), partition, id, off, n)
	if err != nil {
		t.Fatalf("Open(%s, %s, %d, %d): %v", partition, id, off, n, err)
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read of Open(%s, %d, %d): %v", id, off, n, err)
	}
	return b, info
}

func blobStat(t testing.TB, s ports.BlobStore, partition, id string) (ports.BlobInfo, bool) {
	t.Helper()
	info, ok, err := s.Stat(context.Background(), partition, id)
	if err != nil {
		t.Fatalf("Stat(%s, %s): %v", partition, id, err)
	}
	return info, ok
}

func blobListed(t testing.TB, s ports.BlobStore, partition string, before int64, after string, limit int) []ports.BlobInfo {
	t.Helper()
	l, err := s.ListCreatedBefore(context.Background(), partition, before, after, limit)
	if err != nil {
		t.Fatalf("ListCreatedBefore(%s, %d, %q, %d): %v", partition, before, after, limit, err)
	}
	return l
}

// blobAbsent asserts that nothing of id is visible in partition: Stat,
// Open and the blob GC's listing all agree.
func blobAbsent(t testing.TB, s ports.BlobStore, partition, id string) {
	t.Helper()
	if info, ok := blobStat(t, s, partition, id); ok {
		t.Fatalf("Stat(%s) found %+v, want nothing", id, info)
	}
	if rc, _, err := s.Open(context.Background(), partition, id, 0, -1); syncerr.CodeOf(err) != syncerr.BlobNotFound {
		if rc != nil {
			_ = rc.Close()
		}
		t.Fatalf("Open(%s) = %v, want blob.not_found", id, err)
	}
	if l := blobListed(t, s, partition, 1<<62, "", 100); len(l) != 0 {
		t.Fatalf("ListCreatedBefore lists %+v, want nothing", l)
	}
}

func blobRoundTrip(t *testing.T, h BlobHarness) {
	s := h.New(t)
	b := blobBytes(1, 300<<10)
	u := blobUp("p1", b, "image/png", 1000)
	want := ports.BlobInfo{Partition: "p1", BlobID: u.BlobID, ByteLength: int64(len(b)), MediaType: "image/png", CreatedAtMs: 1000}
	if got := blobMustPut(t, s, u, b); got != want {
		t.Fatalf("Put returned %+v, want %+v", got, want)
	}
	if got, ok := blobStat(t, s, "p1", u.BlobID); !ok || got != want {
		t.Fatalf("Stat = %+v %v, want %+v", got, ok, want)
	}
	got, info := blobRead(t, s, "p1", u.BlobID, 0, -1)
	if !bytes.Equal(got, b) || info != want {
		t.Fatalf("Open returned %d bytes (equal %v) and %+v, want %+v", len(got), bytes.Equal(got, b), info, want)
	}
	// An unknown length (a chunked body) is judged by its hash alone.
	c := blobBytes(2, 70<<10)
	uc := blobUp("p1", c, "", 1001)
	uc.ByteLength = -1
	if got := blobMustPut(t, s, uc, c); got.ByteLength != int64(len(c)) {
		t.Fatalf("Put of an undeclared length recorded %d bytes, want %d", got.ByteLength, len(c))
	}
	if got, _ := blobRead(t, s, "p1", uc.BlobID, 0, -1); !bytes.Equal(got, c) {
		t.Fatal("undeclared-length blob bytes differ")
	}
}

func blobMediaType(t *testing.T, h BlobHarness) {
	s := h.New(t)
	for i, media := range []string{"", "application/pdf", "text/plain; charset=utf-8"} {
		b := []byte(fmt.Sprintf("media %d", i))
		blobMustPut(t, s, blobUp("p1", b, media, 5), b)
		if info, ok := blobStat(t, s, "p1", contentaddr.Of(b)); !ok || info.MediaType != media {
			t.Fatalf("Stat media type = %q (found %v), want %q", info.MediaType, ok, media)
		}
	}
}

// failReader fails every Read: a store that reads it has read a body it
// needed not read.
type failReader struct{ read bool }

func (f *failReader) Read([]byte) (int, error) {
	f.read = true
	return 0, errors.New("the body of an idempotent re-put was read")
}

func blobReput(t *testing.T, h BlobHarness) {
	s := h.New(t)
	b := []byte("uploaded twice")
	first := blobMustPut(t, s, blobUp("p1", b, "text/plain", 1000), b)
	// A re-upload with another media type and time keeps the stored blob.
	f := &failReader{}
	info, created, err := s.Put(context.Background(), blobUp("p1", b, "application/octet-stream", 9000), f)
	if err != nil || created || info != first {
		t.Fatalf("re-Put = %+v, created %v, %v; want %+v, created false", info, created, err, first)
	}
	// Reading the body is allowed, as long as it is not required.
	info, created, err = s.Put(context.Background(), blobUp("p1", b, "", 9000), bytes.NewReader(b))
	if err != nil || created || info != first {
		t.Fatalf("re-Put with the body = %+v, created %v, %v; want %+v, created false", info, created, err, first)
	}
	if got, ok := blobStat(t, s, "p1", first.BlobID); !ok || got != first {
		t.Fatalf("Stat after re-puts = %+v %v, want %+v", got, ok, first)
	}
}

func blobUnknown(t *testing.T, h BlobHarness) {
	s := h.New(t)
	for _, id := range []string{contentaddr.Of([]byte("never uploaded")), "sha256:../../../etc/passwd", "", "not-an-id",
		"SHA256:" + contentaddr.Of(nil)[7:]} {
		blobAbsent(t, s, "p1", id)
		if err := s.Delete(context.Background(), "p1", id); err != nil {
			t.Fatalf("Delete(%q) of an absent blob: %v", id, err)
		}
	}
	// A malformed id names no body: nothing can match it.
	_, _, err := s.Put(context.Background(), ports.BlobUpload{Partition: "p1", BlobID: "sha256:../x", ByteLength: 1, MaxBytes: 10},
		bytes.NewReader([]byte("x")))
	if syncerr.CodeOf(err) != syncerr.BlobHashMismatch {
		t.Fatalf("Put under a malformed id: %v, want blob.hash_mismatch", err)
	}
}

func blobHashMismatch(t *testing.T, h BlobHarness) {
	sizes := []struct {
		name string
		n    int
	}{{"small", 100}, {"several_chunks", 2<<20 + 17}}
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) {
			s := h.New(t)
			claimed := blobBytes(10, sz.n)
			sent := bytes.Clone(claimed)
			sent[len(sent)-1] ^= 0xff // the last byte differs: judged only at the end
			u := blobUp("p1", claimed, "image/png", 1000)
			for _, declared := range []int64{int64(sz.n), -1} {
				u.ByteLength = declared
				_, _, err := s.Put(context.Background(), u, bytes.NewReader(sent))
				if syncerr.CodeOf(err) != syncerr.BlobHashMismatch {
					t.Fatalf("Put of other bytes (declared %d): %v, want blob.hash_mismatch", declared, err)
				}
				blobAbsent(t, s, "p1", u.BlobID)
			}
			// Nothing stuck: the right bytes upload afterwards.
			u.ByteLength = int64(sz.n)
			blobMustPut(t, s, u, claimed)
		})
	}
}

func blobLengthMismatch(t *testing.T, h BlobHarness) {
	s := h.New(t)
	b := blobBytes(20, 5000)
	tests := []struct {
		name     string
		declared int64
		body     []byte
	}{
		{"body_shorter_than_declared", 6000, b},
		{"body_longer_than_declared", 4000, b},
		{"declared_right_body_cut", 5000, b[:4999]},
		{"declared_zero", 0, b},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := blobUp("p1", b, "", 1000)
			u.ByteLength = tc.declared
			_, _, err := s.Put(context.Background(), u, bytes.NewReader(tc.body))
			if syncerr.CodeOf(err) != syncerr.BlobHashMismatch {
				t.Fatalf("Put declaring %d bytes of a %d-byte body: %v, want blob.hash_mismatch", tc.declared, len(tc.body), err)
			}
			blobAbsent(t, s, "p1", u.BlobID)
		})
	}
}

// countingReader counts the bytes a store took from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// streamSlack bounds what a store may read past MaxBytes before refusing:
// buffering a chunk is fine, buffering the body is not.
const streamSlack = 1 << 20

func blobTooLarge(t *testing.T, h BlobHarness) {
	s := h.New(t)
	const limit = 64 << 10
	huge := int64(64 << 20) // far more than any store may buffer
	tests := []struct {
		name     string
		declared int64
	}{
		{"undeclared_length", -1},
		{"declared_under_cap_body_longer", limit / 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &countingReader{r: io.LimitReader(rand.NewChaCha8(seedOf(30)), huge)}
			u := ports.BlobUpload{Partition: "p1", BlobID: contentaddr.Of([]byte("the id of another body")),
				ByteLength: tc.declared, MaxBytes: limit, CreatedAtMs: 1000}
			_, _, err := s.Put(context.Background(), u, src)
			want := syncerr.BlobTooLarge
			if tc.declared >= 0 {
				want = syncerr.BlobHashMismatch // the declared length is passed first
			}
			if syncerr.CodeOf(err) != want {
				t.Fatalf("Put of an endless body over a %d-byte cap: %v, want %s", limit, err, want)
			}
			if src.n > limit+streamSlack {
				t.Fatalf("the store read %d bytes of the body before refusing it (cap %d)", src.n, limit)
			}
			blobAbsent(t, s, "p1", u.BlobID)
		})
	}
	// A declared length over the cap is refused before the body is read.
	b := blobBytes(31, 2000)
	u := blobUp("p1", b, "", 1000)
	u.MaxBytes = 1999
	if _, _, err := s.Put(context.Background(), u, bytes.NewReader(b)); syncerr.CodeOf(err) != syncerr.BlobTooLarge {
		t.Fatalf("Put declaring more than the cap: %v, want blob.too_large", err)
	}
	blobAbsent(t, s, "p1", u.BlobID)
	// Exactly the cap is within it.
	u.MaxBytes = 2000
	blobMustPut(t, s, u, b)
}

// brokenReader gives n bytes of r, then fails (a client that went away).
type brokenReader struct {
	r io.Reader
	n int64
}

var errBodyBroken = errors.New("connection reset by the client")

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errBodyBroken
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	return n, err
}

func blobBodyFails(t *testing.T, h BlobHarness) {
	b := blobBytes(40, 3<<20)
	tests := []struct {
		name   string
		cut    int64
		cancel bool
	}{
		{"reader_fails_early", 1000, false},
		{"reader_fails_after_chunks", 2<<20 + 5, false},
		{"context_cancelled_mid_body", 2<<20 + 5, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := h.New(t)
			for _, declared := range []int64{int64(len(b)), -1} {
				u := blobUp("p1", b, "", 1000)
				u.ByteLength = declared
				ctx, cancel := context.WithCancel(context.Background())
				var r io.Reader = &brokenReader{r: bytes.NewReader(b), n: tc.cut}
				if tc.cancel {
					// Cancelled while the body streams; the body itself is whole.
					r = io.MultiReader(bytes.NewReader(b[:tc.cut]), &cancelThenRest{cancel: cancel, rest: bytes.NewReader(b[tc.cut:])})
				}
				_, _, err := s.Put(ctx, u, r)
				cancel()
				if err == nil {
					t.Fatalf("Put with a failing body (declared %d) succeeded", declared)
				}
				blobAbsent(t, s, "p1", u.BlobID)
			}
		})
	}
}

// cancelThenRest cancels its context on the first read, then reads rest.
type cancelThenRest struct {
	cancel func()
	rest   io.Reader
}

func (c *cancelThenRest) Read(p []byte) (int, error) {
	c.cancel()
	return c.rest.Read(p)
}

func blobRanges(t *testing.T, h BlobHarness) {
	s := h.New(t)
	b := blobBytes(50, 2<<20+300<<10+7) // several chunks of every store's default size
	n := int64(len(b))
	u := blobUp("p1", b, "video/mp4", 1000)
	blobMustPut(t, s, u, b)
	tests := []struct {
		name        string
		off, length int64
		want        []byte
	}{
		{"whole", 0, -1, b},
		{"whole_by_length", 0, n, b},
		{"start", 0, 100, b[:100]},
		{"middle_one_byte", n / 2, 1, b[n/2 : n/2+1]},
		{"middle_across_a_mebibyte", 1<<20 - 10, 20, b[1<<20-10 : 1<<20+10]},
		{"middle_long", 300 << 10, 1 << 20, b[300<<10 : 300<<10+1<<20]},
		{"end", n - 100, 100, b[n-100:]},
		{"end_by_minus_one", n - 100, -1, b[n-100:]},
		{"last_byte", n - 1, -1, b[n-1:]},
		{"zero_length_at_start", 0, 0, nil},
		{"zero_length_in_middle", n / 3, 0, nil},
		{"zero_length_at_end", n, 0, nil},
		{"at_end_to_end", n, -1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, info := blobRead(t, s, "p1", u.BlobID, tc.off, tc.length)
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("Open(%d, %d) read %d bytes, want %d (equal %v)", tc.off, tc.length, len(got), len(tc.want), bytes.Equal(got, tc.want))
			}
			if info.ByteLength != n || info.MediaType != "video/mp4" {
				t.Fatalf("Open of a range returned %+v, want the whole blob's info", info)
			}
		})
	}
}

func blobEmpty(t *testing.T, h BlobHarness) {
	s := h.New(t)
	u := blobUp("p1", nil, "text/plain", 1000)
	want := ports.BlobInfo{Partition: "p1", BlobID: contentaddr.Of(nil), ByteLength: 0, MediaType: "text/plain", CreatedAtMs: 1000}
	if got := blobMustPut(t, s, u, nil); got != want {
		t.Fatalf("Put of the empty blob = %+v, want %+v", got, want)
	}
	if got, ok := blobStat(t, s, "p1", u.BlobID); !ok || got != want {
		t.Fatalf("Stat of the empty blob = %+v %v", got, ok)
	}
	for _, length := range []int64{-1, 0} {
		if got, info := blobRead(t, s, "p1", u.BlobID, 0, length); len(got) != 0 || info != want {
			t.Fatalf("Open(0, %d) of the empty blob: %d bytes, %+v", length, len(got), info)
		}
	}
}

func blobPartitions(t *testing.T, h BlobHarness) {
	s := h.New(t)
	b := []byte("the same bytes in two partitions")
	id := contentaddr.Of(b)
	one := blobMustPut(t, s, blobUp("tenant-a", b, "text/plain", 1000), b)
	// Another partition does not see it ...
	blobAbsent(t, s, "tenant-b", id)
	// ... and gets its own blob with its own metadata.
	two := blobMustPut(t, s, blobUp("tenant-b", b, "", 2000), b)
	if got, _ := blobStat(t, s, "tenant-a", id); got != one {
		t.Fatalf("partition a's blob changed to %+v", got)
	}
	if got, _ := blobStat(t, s, "tenant-b", id); got != two {
		t.Fatalf("partition b's blob = %+v, want %+v", got, two)
	}
	if l := blobListed(t, s, "tenant-a", 1<<62, "", 10); len(l) != 1 || l[0] != one {
		t.Fatalf("partition a lists %+v", l)
	}
	// Names that are not plain words are partitions like any other.
	for _, p := range []string{"../tenant-a", "tenant-a/", "TENANT-A", "ü/ß", "a\\b"} {
		blobAbsent(t, s, p, id)
	}
	odd := blobMustPut(t, s, blobUp("../tenant-a", b, "", 3000), b)
	if got, _ := blobStat(t, s, "../tenant-a", id); got != odd {
		t.Fatalf("odd partition's blob = %+v", got)
	}
	if err := s.Delete(context.Background(), "tenant-a", id); err != nil {
		t.Fatal(err)
	}
	blobAbsent(t, s, "tenant-a", id)
	if got, ok := blobStat(t, s, "tenant-b", id); !ok || got != two {
		t.Fatalf("Delete in one partition removed the other's blob: %+v %v", got, ok)
	}
	if got, _ := blobRead(t, s, "tenant-b", id, 0, -1); !bytes.Equal(got, b) {
		t.Fatal("partition b's bytes differ after a delete in partition a")
	}
}

func blobList(t *testing.T, h BlobHarness) {
	s := h.New(t)
	var all []ports.BlobInfo
	for i := range 7 {
		b := []byte(fmt.Sprintf("blob %d", i))
		all = append(all, blobMustPut(t, s, blobUp("p1", b, "", int64(1000*(i+1))), b))
	}
	other := []byte("another partition's blob")
	blobMustPut(t, s, blobUp("p2", other, "", 1), other)
	sort.Slice(all, func(i, j int) bool { return all[i].BlobID < all[j].BlobID })
	older := func(before int64) []ports.BlobInfo {
		var out []ports.BlobInfo
		for _, b := range all {
			if b.CreatedAtMs < before {
				out = append(out, b)
			}
		}
		return out
	}
	// The bound is strict: a blob created at beforeMs is not before it.
	for _, before := range []int64{0, 1000, 1001, 4000, 7000, 7001} {
		got := blobListed(t, s, "p1", before, "", 100)
		if want := older(before); !equalInfos(got, want) {
			t.Fatalf("ListCreatedBefore(%d) = %+v, want %+v", before, got, want)
		}
	}
	// Paging by id, two at a time, walks every old blob once in id order.
	want := older(6000)
	var paged []ports.BlobInfo
	for after := ""; ; {
		page := blobListed(t, s, "p1", 6000, after, 2)
		if len(page) > 2 {
			t.Fatalf("a page of limit 2 holds %d blobs", len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1].BlobID
	}
	if !equalInfos(paged, want) {
		t.Fatalf("paged listing = %+v, want %+v", paged, want)
	}
	// After the last id there is nothing.
	if got := blobListed(t, s, "p1", 1<<62, all[len(all)-1].BlobID, 10); len(got) != 0 {
		t.Fatalf("listing after the last id = %+v", got)
	}
	if got := blobListed(t, s, "p3", 1<<62, "", 10); len(got) != 0 {
		t.Fatalf("an empty partition lists %+v", got)
	}
}

func equalInfos(a, b []ports.BlobInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func blobDelete(t *testing.T, h BlobHarness) {
	s := h.New(t)
	b := blobBytes(60, 2<<20+1) // several chunks go with it
	keep := []byte("kept")
	u := blobUp("p1", b, "", 1000)
	blobMustPut(t, s, u, b)
	blobMustPut(t, s, blobUp("p1", keep, "", 1000), keep)
	if err := s.Delete(context.Background(), "p1", u.BlobID); err != nil {
		t.Fatal(err)
	}
	if _, ok := blobStat(t, s, "p1", u.BlobID); ok {
		t.Fatal("Stat finds a deleted blob")
	}
	if _, _, err := s.Open(context.Background(), "p1", u.BlobID, 0, -1); syncerr.CodeOf(err) != syncerr.BlobNotFound {
		t.Fatalf("Open of a deleted blob: %v, want blob.not_found", err)
	}
	if l := blobListed(t, s, "p1", 1<<62, "", 10); len(l) != 1 || l[0].BlobID != contentaddr.Of(keep) {
		t.Fatalf("after Delete the partition lists %+v", l)
	}
	// Deleting again, or what never was, is not an error.
	if err := s.Delete(context.Background(), "p1", u.BlobID); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	// A deleted blob uploads anew.
	if _, created, err := s.Put(context.Background(), u, bytes.NewReader(b)); err != nil || !created {
		t.Fatalf("Put after Delete: created %v, %v", created, err)
	}
	if got, _ := blobRead(t, s, "p1", u.BlobID, 0, -1); !bytes.Equal(got, b) {
		t.Fatal("re-uploaded bytes differ")
	}
}

func blobConcurrent(t *testing.T, h BlobHarness) {
	s := h.New(t)
	b := blobBytes(70, 1<<20+200<<10)
	const n = 8
	type result struct {
		info    ports.BlobInfo
		created bool
		err     error
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := blobUp("p1", b, "", int64(1000+i))
			if i%2 == 1 {
				u.ByteLength = -1
			}
			info, created, err := s.Put(context.Background(), u, bytes.NewReader(b))
			results <- result{info, created, err}
		}()
	}
	wg.Wait()
	close(results)
	createdN := 0
	for r := range results {
		if r.err != nil {
			t.Fatalf("a concurrent Put failed: %v", r.err)
		}
		if r.info.ByteLength != int64(len(b)) || r.info.BlobID != contentaddr.Of(b) {
			t.Fatalf("a concurrent Put returned %+v", r.info)
		}
		if r.created {
			createdN++
		}
	}
	if createdN == 0 {
		t.Fatal("no concurrent Put reported creating the blob")
	}
	if l := blobListed(t, s, "p1", 1<<62, "", 10); len(l) != 1 {
		t.Fatalf("after %d concurrent Puts of one blob the partition lists %d blobs", n, len(l))
	}
	if got, _ := blobRead(t, s, "p1", contentaddr.Of(b), 0, -1); !bytes.Equal(got, b) {
		t.Fatal("bytes differ after concurrent Puts")
	}
}

// largeBlobBytes is the size of the large case: it streams, so only the
// time grows with it (the race detector slows the engines down).
func largeBlobBytes() int64 {
	if raceEnabled {
		return 8 << 20
	}
	return 20 << 20
}

func blobLarge(t *testing.T, h BlobHarness) {
	s := h.New(t)
	size := largeBlobBytes()
	gen := func() io.Reader { return io.LimitReader(rand.NewChaCha8(seedOf(80)), size) }
	hs := contentaddr.NewHasher()
	if _, err := io.Copy(hs, gen()); err != nil {
		t.Fatal(err)
	}
	id := hs.Sum()
	for _, declared := range []int64{size, -1} {
		p := fmt.Sprintf("p%d", declared)
		u := ports.BlobUpload{Partition: p, BlobID: id, ByteLength: declared, MaxBytes: size, CreatedAtMs: 1000}
		// The body is a generator, not a buffer: a store that kept it whole
		// would hold what no test gave it.
		info, created, err := s.Put(context.Background(), u, gen())
		if err != nil || !created || info.ByteLength != size {
			t.Fatalf("Put of %d streamed bytes (declared %d): %+v created %v, %v", size, declared, info, created, err)
		}
		rc, _, err := s.Open(context.Background(), p, id, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		back := contentaddr.NewHasher()
		n, err := io.Copy(back, rc)
		_ = rc.Close()
		if err != nil || n != size || back.Sum() != id {
			t.Fatalf("read back %d of %d bytes, hash match %v, %v", n, size, back.Sum() == id, err)
		}
		// A range near the end reads what the generator made there.
		want := make([]byte, 4096)
		g := gen()
		if _, err := io.CopyN(io.Discard, g, size-5000); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(g, want); err != nil {
			t.Fatal(err)
		}
		if got, _ := blobRead(t, s, p, id, size-5000, 4096); !bytes.Equal(got, want) {
			t.Fatal("range near the end of the large blob differs")
		}
	}
	// One byte over the cap is refused, however late it comes.
	u := ports.BlobUpload{Partition: "over", BlobID: id, ByteLength: -1, MaxBytes: size - 1, CreatedAtMs: 1000}
	if _, _, err := s.Put(context.Background(), u, gen()); syncerr.CodeOf(err) != syncerr.BlobTooLarge {
		t.Fatalf("Put one byte over the cap: %v, want blob.too_large", err)
	}
	blobAbsent(t, s, "over", id)
}

func blobReopen(t *testing.T, h BlobHarness) {
	if h.Reopen == nil {
		t.Skip("store is not persistent")
	}
	s := h.New(t)
	b := blobBytes(90, 1<<20+3)
	info := blobMustPut(t, s, blobUp("p1", b, "image/webp", 1234), b)
	s2 := h.Reopen(t, s)
	if got, ok := blobStat(t, s2, "p1", info.BlobID); !ok || got != info {
		t.Fatalf("reopened Stat = %+v %v, want %+v", got, ok, info)
	}
	if got, _ := blobRead(t, s2, "p1", info.BlobID, 0, -1); !bytes.Equal(got, b) {
		t.Fatal("reopened bytes differ")
	}
	// The second store sees the first's new blobs and deletes.
	c := []byte("written by the first store after the reopen")
	blobMustPut(t, s, blobUp("p1", c, "", 1), c)
	if _, ok := blobStat(t, s2, "p1", contentaddr.Of(c)); !ok {
		t.Fatal("a second store does not see a blob the first wrote")
	}
	if err := s2.Delete(context.Background(), "p1", info.BlobID); err != nil {
		t.Fatal(err)
	}
	if _, ok := blobStat(t, s, "p1", info.BlobID); ok {
		t.Fatal("the first store still sees a blob the second deleted")
	}
}

// BenchBlobs measures one store's throughput (go test -bench): Put1MB
// uploads distinct 1 MiB blobs of declared length, Put1MBChunked the same
// of undeclared length, Open1MB reads one whole, OpenRange64KB reads 64
// KiB from its middle.
func BenchBlobs(b *testing.B, h BlobHarness) {
	const size = 1 << 20
	body := blobBytes(100, size)
	put := func(b *testing.B, declared bool) {
		s := h.New(b)
		b.SetBytes(size)
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			body[0], body[1], body[2], body[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
			u := blobUp("bench", body, "application/octet-stream", int64(i))
			if !declared {
				u.ByteLength = -1
			}
			b.StartTimer()
			if _, created, err := s.Put(context.Background(), u, bytes.NewReader(body)); err != nil || !created {
				b.Fatalf("Put: created %v, %v", created, err)
			}
		}
	}
	b.Run("Put1MB", func(b *testing.B) { put(b, true) })
	b.Run("Put1MBChunked", func(b *testing.B) { put(b, false) })
	read := func(b *testing.B, off, n int64) {
		s := h.New(b)
		u := blobUp("bench", body, "", 1)
		blobMustPut(b, s, u, body)
		b.SetBytes(n)
		b.ResetTimer()
		for range b.N {
			rc, _, err := s.Open(context.Background(), "bench", u.BlobID, off, n)
			if err != nil {
				b.Fatal(err)
			}
			if got, err := io.Copy(io.Discard, rc); err != nil || got != n {
				b.Fatalf("read %d of %d bytes: %v", got, n, err)
			}
			_ = rc.Close()
		}
	}
	b.Run("Open1MB", func(b *testing.B) { read(b, 0, size) })
	b.Run("OpenRange64KB", func(b *testing.B) { read(b, size/2, 64<<10) })
}

package blobio

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func TestVerifier(t *testing.T) {
	body := []byte("hello, blob")
	id := contentaddr.Of(body)
	tests := []struct {
		name     string
		u        ports.BlobUpload
		body     string
		want     syncerr.Code // "" passes
		maxRead  int64        // bytes the source may give up, at most
		readDone bool         // read the body to EOF before Finish
	}{
		{"declared length, matching", ports.BlobUpload{BlobID: id, ByteLength: int64(len(body)), MaxBytes: 100}, string(body), "", 12, true},
		{"unknown length, matching", ports.BlobUpload{BlobID: id, ByteLength: -1, MaxBytes: 100}, string(body), "", 12, true},
		{"no cap", ports.BlobUpload{BlobID: id, ByteLength: -1}, string(body), "", 12, true},
		{"other bytes", ports.BlobUpload{BlobID: id, ByteLength: -1, MaxBytes: 100}, "hello, blog", syncerr.BlobHashMismatch, 12, true},
		{"shorter than declared", ports.BlobUpload{BlobID: id, ByteLength: 20, MaxBytes: 100}, string(body), syncerr.BlobHashMismatch, 21, true},
		{"longer than declared", ports.BlobUpload{BlobID: id, ByteLength: 5, MaxBytes: 100}, string(body), syncerr.BlobHashMismatch, 6, true},
		{"over the cap", ports.BlobUpload{BlobID: id, ByteLength: -1, MaxBytes: 4}, string(body), syncerr.BlobTooLarge, 5, true},
		{"exactly the cap", ports.BlobUpload{BlobID: id, ByteLength: -1, MaxBytes: int64(len(body))}, string(body), "", 12, true},
		{"declared length read, rest unseen", ports.BlobUpload{BlobID: id, ByteLength: int64(len(body)), MaxBytes: 100}, string(body) + "x", syncerr.BlobHashMismatch, 12, false},
		{"declared length read exactly", ports.BlobUpload{BlobID: id, ByteLength: int64(len(body)), MaxBytes: 100}, string(body), "", 12, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &countingReader{r: strings.NewReader(tc.body)}
			v := NewVerifier(context.Background(), src, tc.u)
			var err error
			if tc.readDone {
				_, err = io.Copy(io.Discard, v)
			} else {
				_, err = io.CopyN(io.Discard, v, tc.u.ByteLength)
			}
			if err == nil {
				err = v.Finish()
			}
			if got := syncerr.CodeOf(err); got != tc.want || (tc.want == "" && err != nil) {
				t.Fatalf("error %v, want code %q", err, tc.want)
			}
			if src.n > tc.maxRead {
				t.Fatalf("read %d bytes of the source, want at most %d", src.n, tc.maxRead)
			}
		})
	}
}

func TestVerifierStopsWhenTheContextEnds(t *testing.T) {
	b := make([]byte, 10_000)
	ctx, cancel := context.WithCancel(context.Background())
	v := NewVerifier(ctx, &countingReader{r: strings.NewReader(string(b))}, ports.BlobUpload{BlobID: contentaddr.Of(b), ByteLength: -1})
	if _, err := io.CopyN(io.Discard, v, 100); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.Copy(io.Discard, v); err != context.Canceled {
		t.Fatalf("read after cancellation: %v", err)
	}
	if err := v.Finish(); err != context.Canceled {
		t.Fatalf("Finish after cancellation: %v", err)
	}
}

func TestCheck(t *testing.T) {
	id := contentaddr.Of(nil)
	tests := []struct {
		name string
		u    ports.BlobUpload
		want syncerr.Code
	}{
		{"ok", ports.BlobUpload{BlobID: id, ByteLength: 10, MaxBytes: 10}, ""},
		{"unknown length", ports.BlobUpload{BlobID: id, ByteLength: -1, MaxBytes: 10}, ""},
		{"declared over the cap", ports.BlobUpload{BlobID: id, ByteLength: 11, MaxBytes: 10}, syncerr.BlobTooLarge},
		{"not a content address", ports.BlobUpload{BlobID: "sha256:../../etc", ByteLength: 1}, syncerr.BlobHashMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := syncerr.CodeOf(Check(tc.u)); got != tc.want {
				t.Fatalf("code %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRange(t *testing.T) {
	tests := []struct {
		size, off, n   int64
		wantOff, wantN int64
		wantErr        bool
	}{
		{10, 0, -1, 0, 10, false},
		{10, 3, 4, 3, 4, false},
		{10, 3, 100, 3, 7, false},
		{10, 10, -1, 10, 0, false},
		{0, 0, -1, 0, 0, false},
		{10, 11, 1, 0, 0, true},
		{10, -1, 1, 0, 0, true},
	}
	for _, tc := range tests {
		off, n, err := Range(tc.size, tc.off, tc.n)
		if (err != nil) != tc.wantErr || (err == nil && (off != tc.wantOff || n != tc.wantN)) {
			t.Errorf("Range(%d, %d, %d) = %d, %d, %v", tc.size, tc.off, tc.n, off, n, err)
		}
	}
}

func TestPartitionKey(t *testing.T) {
	long := strings.Repeat("x", 300)
	seen := map[string]string{}
	for _, p := range []string{"", "a", "A", "../x", "a/b", "ü", long, long + "y"} {
		k := PartitionKey(p)
		if len(k) > 210 || strings.ContainsAny(k, "/\\.:") || strings.ToLower(k) != k {
			t.Errorf("PartitionKey(%q) = %q: not one safe lowercase segment", p, k)
		}
		if other, dup := seen[k]; dup {
			t.Errorf("PartitionKey(%q) = PartitionKey(%q) = %q", p, other, k)
		}
		seen[k] = p
	}
}

func TestStagingName(t *testing.T) {
	n, err := StagingName(1234)
	if err != nil {
		t.Fatal(err)
	}
	if ms, ok := StagingStarted(n); !ok || ms != 1234 {
		t.Fatalf("StagingStarted(%q) = %d, %v", n, ms, ok)
	}
	if _, ok := StagingStarted("garbage"); ok {
		t.Fatal("a foreign name parsed")
	}
}

func TestSweepGate(t *testing.T) {
	var g SweepGate
	steps := []struct {
		now  int64
		want bool
	}{{1000, true}, {1500, false}, {2000, true}, {2999, false}, {1000, true}}
	for _, s := range steps {
		if got := g.Due(s.now, 1000); got != s.want {
			t.Fatalf("Due(%d) = %v, want %v", s.now, got, s.want)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

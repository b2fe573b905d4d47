package memblob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/blobs/memblob"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func upload(data []byte) ports.BlobUpload {
	return ports.BlobUpload{Partition: "p", BlobID: contentaddr.Of(data), MediaType: "text/plain", ByteLength: int64(len(data)), MaxBytes: 1 << 20, CreatedAtMs: 100}
}

// unreadable fails the test that reads it: an idempotent Put must not.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("the body of an already stored blob was read")
	return 0, io.EOF
}

func TestPut(t *testing.T) {
	data := []byte("hello, attached file")
	for _, tc := range []struct {
		name string
		edit func(*ports.BlobUpload)
		body string
		want syncerr.Code
	}{
		{name: "stored", body: string(data)},
		{name: "unknown length", edit: func(u *ports.BlobUpload) { u.ByteLength = -1 }, body: string(data)},
		{name: "other bytes", body: "hello, attached filE", want: syncerr.BlobHashMismatch},
		{name: "shorter than declared", edit: func(u *ports.BlobUpload) { u.ByteLength++ }, body: string(data), want: syncerr.BlobHashMismatch},
		{name: "longer than declared", edit: func(u *ports.BlobUpload) { u.ByteLength-- }, body: string(data), want: syncerr.BlobHashMismatch},
		{name: "declared over the cap", edit: func(u *ports.BlobUpload) { u.MaxBytes = u.ByteLength - 1 }, body: string(data), want: syncerr.BlobTooLarge},
		{name: "streamed over the cap", edit: func(u *ports.BlobUpload) { u.MaxBytes = u.ByteLength - 1; u.ByteLength = -1 }, body: string(data), want: syncerr.BlobTooLarge},
		{name: "exactly the cap", edit: func(u *ports.BlobUpload) { u.MaxBytes = u.ByteLength }, body: string(data)},
		{name: "not a content address", edit: func(u *ports.BlobUpload) { u.BlobID = "sha256:ABC" }, body: string(data), want: syncerr.BlobHashMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memblob.New()
			u := upload(data)
			if tc.edit != nil {
				tc.edit(&u)
			}
			info, created, err := s.Put(context.Background(), u, strings.NewReader(tc.body))
			if tc.want != "" {
				if syncerr.CodeOf(err) != tc.want {
					t.Fatalf("Put err = %v, want %s", err, tc.want)
				}
				if s.Len() != 0 {
					t.Fatalf("a refused upload left %d blobs", s.Len())
				}
				return
			}
			if err != nil || !created {
				t.Fatalf("Put = %v %v", created, err)
			}
			want := ports.BlobInfo{Partition: "p", BlobID: u.BlobID, ByteLength: int64(len(data)), MediaType: "text/plain", CreatedAtMs: 100}
			if info != want {
				t.Fatalf("info %+v, want %+v", info, want)
			}
			got, ok, err := s.Stat(context.Background(), "p", u.BlobID)
			if err != nil || !ok || got != want {
				t.Fatalf("Stat = %+v %v %v", got, ok, err)
			}
		})
	}
}

func TestPutIsIdempotent(t *testing.T) {
	s := memblob.New()
	data := []byte("twice")
	u := upload(data)
	first, _, err := s.Put(context.Background(), u, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	again := u
	again.CreatedAtMs, again.MediaType = 999, "image/png"
	info, created, err := s.Put(context.Background(), again, unreadable{t})
	if err != nil || created || info != first {
		t.Fatalf("second Put = %+v %v %v, want the first blob kept", info, created, err)
	}
}

func TestConcurrentPutsStoreOnce(t *testing.T) {
	s := memblob.New()
	data := bytes.Repeat([]byte("x"), 64<<10)
	u := upload(data)
	var wg sync.WaitGroup
	created := make(chan bool, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, c, err := s.Put(context.Background(), u, bytes.NewReader(data))
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
	if n != 1 || s.Len() != 1 {
		t.Fatalf("%d Puts created the blob, %d stored; want 1 and 1", n, s.Len())
	}
}

func TestPartitionsAreApart(t *testing.T) {
	s := memblob.New()
	data := []byte("mine")
	if _, _, err := s.Put(context.Background(), upload(data), bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Stat(context.Background(), "q", contentaddr.Of(data)); ok {
		t.Fatal("a blob of partition p is visible in q")
	}
	if _, _, err := s.Open(context.Background(), "q", contentaddr.Of(data), 0, -1); syncerr.CodeOf(err) != syncerr.BlobNotFound {
		t.Fatalf("Open in another partition: %v, want blob.not_found", err)
	}
}

func TestOpenRanges(t *testing.T) {
	s := memblob.New()
	data := []byte("0123456789")
	u := upload(data)
	if _, _, err := s.Put(context.Background(), u, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		offset, length int64
		want           string
		fails          bool
	}{
		{0, -1, "0123456789", false},
		{3, 4, "3456", false},
		{9, -1, "9", false},
		{10, 0, "", false},
		{10, -1, "", false},
		{8, 3, "", true},
		{11, -1, "", true},
		{-1, 2, "", true},
	} {
		rc, info, err := s.Open(context.Background(), "p", u.BlobID, tc.offset, tc.length)
		if tc.fails {
			if err == nil {
				t.Errorf("Open(%d, %d) succeeded outside the blob", tc.offset, tc.length)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Open(%d, %d): %v", tc.offset, tc.length, err)
		}
		got, _ := io.ReadAll(rc)
		_ = rc.Close()
		if string(got) != tc.want || info.ByteLength != 10 {
			t.Errorf("Open(%d, %d) = %q (%d bytes total), want %q", tc.offset, tc.length, got, info.ByteLength, tc.want)
		}
	}
	if _, _, err := s.Open(context.Background(), "p", contentaddr.Of([]byte("absent")), 0, -1); syncerr.CodeOf(err) != syncerr.BlobNotFound {
		t.Fatalf("Open of an absent blob: %v", err)
	}
}

func TestListCreatedBeforeAndDelete(t *testing.T) {
	s := memblob.New()
	ctx := context.Background()
	var ids []string
	for i, body := range []string{"a", "b", "c", "d", "e"} {
		u := upload([]byte(body))
		u.CreatedAtMs = int64(i * 10) // 0, 10, 20, 30, 40
		if _, _, err := s.Put(ctx, u, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.BlobID)
	}
	other := upload([]byte("a"))
	other.Partition = "q"
	if _, _, err := s.Put(ctx, other, strings.NewReader("a")); err != nil {
		t.Fatal(err)
	}
	// Pages of two, ordered by blob id, of the blobs created before 35.
	var got []string
	after := ""
	for {
		page, err := s.ListCreatedBefore(ctx, "p", 35, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, b := range page {
			got = append(got, b.BlobID)
			if b.CreatedAtMs >= 35 || b.Partition != "p" {
				t.Fatalf("listed %+v", b)
			}
		}
		after = page[len(page)-1].BlobID
	}
	if len(got) != 4 {
		t.Fatalf("listed %d blobs, want 4 (created at 0, 10, 20, 30)", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("not in blob id order: %v", got)
		}
	}
	if err := s.Delete(ctx, "p", ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "p", ids[0]); err != nil {
		t.Fatalf("deleting an absent blob: %v", err)
	}
	if _, ok, _ := s.Stat(ctx, "p", ids[0]); ok {
		t.Fatal("deleted blob still stored")
	}
	if _, ok, _ := s.Stat(ctx, "q", other.BlobID); !ok {
		t.Fatal("deleting in p removed the blob of q")
	}
	if _, err := s.ListCreatedBefore(ctx, "p", 35, "", 0); err == nil {
		t.Fatal("limit 0 accepted")
	}
}

func TestPutStopsWithItsContext(t *testing.T) {
	s := memblob.New()
	ctx, cancel := context.WithCancel(context.Background())
	data := bytes.Repeat([]byte("y"), 1<<16)
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(data[:100])
		cancel()
		_, _ = pw.Write(data[100:])
		_ = pw.Close()
	}()
	_, _, err := s.Put(ctx, upload(data), pr)
	_ = pr.Close()
	if !errors.Is(err, context.Canceled) || s.Len() != 0 {
		t.Fatalf("Put after cancel = %v with %d blobs", err, s.Len())
	}
}

package fsblob

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, StaleUploadAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func upload(partition string, b []byte, created int64) ports.BlobUpload {
	return ports.BlobUpload{Partition: partition, BlobID: contentaddr.Of(b), ByteLength: int64(len(b)), MaxBytes: 1 << 30, CreatedAtMs: created}
}

// files lists the regular files under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestProcessesShareTheDirectory: stores over one directory (two
// processes) racing to upload one blob create it exactly once, and each
// sees the other's blobs.
func TestProcessesShareTheDirectory(t *testing.T) {
	dir := t.TempDir()
	stores := []*Store{open(t, dir), open(t, dir)}
	b := bytes.Repeat([]byte("shared "), 100_000)
	const racers = 8
	var wg sync.WaitGroup
	created := make(chan bool, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, c, err := stores[i%2].Put(context.Background(), upload("p", b, int64(i)), bytes.NewReader(b))
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
		t.Fatalf("%d of %d racing Puts created the blob, want exactly 1", n, racers)
	}
	if got := files(t, dir); len(got) != 1 || !strings.HasPrefix(got[0], blobsDir+string(filepath.Separator)) {
		t.Fatalf("files after the race: %v, want the one blob and no staging file", got)
	}
	if _, ok, err := stores[1].Stat(context.Background(), "p", contentaddr.Of(b)); !ok || err != nil {
		t.Fatalf("the other process does not see the blob (%v)", err)
	}
}

// TestEverythingStaysUnderTheRoot: partition names that look like paths
// are encoded, never followed; refused uploads leave no staging file.
func TestEverythingStaysUnderTheRoot(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	s := open(t, dir)
	b := []byte("escaping?")
	for _, p := range []string{"../../escape", "/abs", "a/../../b", `..\x`, strings.Repeat("long", 100)} {
		if _, _, err := s.Put(context.Background(), upload(p, b, 1), bytes.NewReader(b)); err != nil {
			t.Fatalf("Put in partition %q: %v", p, err)
		}
	}
	bad := upload("p", b, 1)
	if _, _, err := s.Put(context.Background(), bad, strings.NewReader("other bytes")); syncerr.CodeOf(err) != syncerr.BlobHashMismatch {
		t.Fatalf("Put of other bytes: %v", err)
	}
	got := files(t, parent)
	if len(got) != 5 {
		t.Fatalf("files: %v, want five blobs", got)
	}
	for _, f := range got {
		if !strings.HasPrefix(f, filepath.Join("store", blobsDir)+string(filepath.Separator)) {
			t.Fatalf("file %s outside the store's blobs", f)
		}
	}
}

// TestStaleStagingIsSwept: staging files older than StaleUploadAfter on
// the app clock are removed by the next Put; younger ones stay.
func TestStaleStagingIsSwept(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	const now = int64(10 * time.Hour / time.Millisecond)
	old := filepath.Join(dir, stagingDir, strconv.FormatInt(now-2*3600_000, 10)+"-dead")
	young := filepath.Join(dir, stagingDir, strconv.FormatInt(now-1000, 10)+"-busy")
	for _, f := range []string{old, young} {
		if err := os.WriteFile(f, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := []byte("later")
	if _, _, err := s.Put(context.Background(), upload("p", b, now), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("stale staging file kept (%v)", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatalf("a running upload's staging file was removed: %v", err)
	}
}

// TestDamagedFileIsAnError: a blob file whose trailer does not describe
// it is reported, never served or taken for absent.
func TestDamagedFileIsAnError(t *testing.T) {
	s := open(t, t.TempDir())
	b := bytes.Repeat([]byte("x"), 5000)
	u := upload("p", b, 1)
	if _, _, err := s.Put(context.Background(), u, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	p, _ := s.path("p", u.BlobID)
	if err := os.Truncate(p, 4000); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Stat(context.Background(), "p", u.BlobID); syncerr.CodeOf(err) != syncerr.InternalError {
		t.Fatalf("Stat of a damaged file: %v, want an internal error", err)
	}
	if _, _, err := s.Open(context.Background(), "p", u.BlobID, 0, -1); syncerr.CodeOf(err) != syncerr.InternalError {
		t.Fatalf("Open of a damaged file: %v, want an internal error", err)
	}
	// Delete still removes it.
	if err := s.Delete(context.Background(), "p", u.BlobID); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Stat(context.Background(), "p", u.BlobID); ok || err != nil {
		t.Fatalf("after Delete: found %v, %v", ok, err)
	}
}

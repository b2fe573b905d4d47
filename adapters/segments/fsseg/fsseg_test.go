package fsseg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/ports"
)

func pub(b []byte) ports.SegmentPublication {
	return ports.SegmentPublication{
		SegmentKey:  ports.SegmentKey{Partition: "p", LogEpoch: "e", Table: "t", ScopeDigest: "d", MediaType: ports.SegmentRows},
		SegmentID:   contentaddr.Of(b),
		CreatedAtMs: 1, ExpiresAtMs: 2,
	}
}

func TestCollisionFailsLoud(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b := []byte("original")
	if _, err := s.Put(context.Background(), b, pub(b)); err != nil {
		t.Fatal(err)
	}
	obj, _ := s.path(objectsDir, contentaddr.Of(b))
	if err := os.WriteFile(obj, []byte("corrupted"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), b, pub(b)); !errors.Is(err, ports.ErrSegmentCollision) {
		t.Fatalf("Put over different stored bytes: %v, want ErrSegmentCollision", err)
	}
	if b2, _ := os.ReadFile(obj); string(b2) != "corrupted" {
		t.Fatal("collision overwrote the stored bytes")
	}
}

func TestOpenDropsStrayTemporaries(t *testing.T) {
	dir := t.TempDir()
	stray := filepath.Join(dir, pubsDir, "ab", tmpPrefix+"x")
	if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("stray temporary kept: %v", err)
	}
}

func TestOpenDropsOrphanBytes(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	kept := []byte("recorded")
	if _, err := s.Put(context.Background(), kept, pub(kept)); err != nil {
		t.Fatal(err)
	}
	orphan, _ := s.path(objectsDir, contentaddr.Of([]byte("unrecorded")))
	if err := writeAtomic(orphan, []byte("unrecorded")); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan bytes kept: %v", err)
	}
	if _, _, err := s2.Open(context.Background(), contentaddr.Of(kept)); err != nil {
		t.Fatalf("recorded segment lost: %v", err)
	}
}

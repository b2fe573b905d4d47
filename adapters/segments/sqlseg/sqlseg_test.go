package sqlseg_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/syncd-dev/syncd/adapters/segments/sqlseg"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/ports"
)

func TestCollisionFailsLoud(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "sync.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := sqlseg.Open(ctx, sqlseg.Options{DB: st.DB(), ReadDB: st.ReadDB()})
	if err != nil {
		t.Fatal(err)
	}
	b := []byte("original bytes")
	p := ports.SegmentPublication{SegmentKey: ports.SegmentKey{Partition: "p", LogEpoch: "e", Table: "t", ScopeDigest: "a"},
		SegmentID: contentaddr.Of(b), ExpiresAtMs: 100}
	if _, err := s.Put(ctx, b, p); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().DB.ExecContext(ctx, `UPDATE sync_segments SET bytes = ?`, []byte("corrupted")); err != nil {
		t.Fatal(err)
	}
	p.ScopeDigest = "b"
	if _, err := s.Put(ctx, b, p); !errors.Is(err, ports.ErrSegmentCollision) {
		t.Fatalf("Put over different stored bytes: %v, want ErrSegmentCollision", err)
	}
	pubs, err := s.Publications(ctx, p.SegmentID)
	if err != nil || len(pubs) != 1 || pubs[0].ScopeDigest != "a" {
		t.Fatalf("a refused Put changed the publications: %+v %v", pubs, err)
	}
}

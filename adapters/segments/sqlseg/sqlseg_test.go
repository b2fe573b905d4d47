package sqlseg_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/syncd-dev/syncd/adapters/segments/sqlseg"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/uptrace/bun"
)

// openStore opens the segment store over an engine's write and read handles.
func openStore(t *testing.T, db, readDB *bun.DB) *sqlseg.Store {
	t.Helper()
	s, err := sqlseg.Open(context.Background(), sqlseg.Options{DB: db, ReadDB: readDB})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCollisionFailsLoud(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "sync.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := openStore(t, st.DB(), st.ReadDB())
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

// TestOpenStreamsChunks reads segments of several chunks (and an empty
// one) back through Read and WriteTo on both engines, refuses an absent
// segment at Open, and fails a read whose segment is removed between
// chunks.
func TestOpenStreamsChunks(t *testing.T) {
	ctx := context.Background()
	engines := map[string]func(t *testing.T) (*sqlseg.Store, *sql.DB){
		"sqlite": func(t *testing.T) (*sqlseg.Store, *sql.DB) {
			st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "sync.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return openStore(t, st.DB(), st.ReadDB()), st.DB().DB
		},
		"postgres": func(t *testing.T) (*sqlseg.Store, *sql.DB) {
			st, err := postgres.Open(ctx, postgres.Options{DSN: pgtest.DSN(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return openStore(t, st.DB(), st.ReadDB()), st.DB().DB
		},
	}
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			s, db := open(t)
			rng := rand.New(rand.NewPCG(1, 2))
			for i, n := range []int{0, 1, 512 << 10, 1<<20 + 12345, 4<<20 + 3} {
				b := make([]byte, n)
				for j := range b {
					b[j] = byte(rng.Uint32())
				}
				p := ports.SegmentPublication{SegmentKey: ports.SegmentKey{Partition: "p", LogEpoch: "e", Table: "t", ScopeDigest: fmt.Sprint(i)},
					SegmentID: contentaddr.Of(b), ByteLength: int64(n), ExpiresAtMs: 100}
				if _, err := s.Put(ctx, b, p); err != nil {
					t.Fatal(err)
				}
				rc, size, err := s.Open(ctx, p.SegmentID)
				if err != nil || size != int64(n) {
					t.Fatalf("Open %d bytes: size %d, %v", n, size, err)
				}
				var got bytes.Buffer
				if _, err := io.Copy(&got, rc); err != nil || !bytes.Equal(got.Bytes(), b) {
					t.Fatalf("WriteTo of %d bytes: %d bytes back, equal %v, %v", n, got.Len(), bytes.Equal(got.Bytes(), b), err)
				}
				_ = rc.Close()
				rc, _, err = s.Open(ctx, p.SegmentID)
				if err != nil {
					t.Fatal(err)
				}
				small, err := io.ReadAll(io.LimitReader(struct{ io.Reader }{rc}, int64(n)+1))
				if err != nil || !bytes.Equal(small, b) {
					t.Fatalf("Read of %d bytes: %d bytes back, %v", n, len(small), err)
				}
				_ = rc.Close()
			}
			if _, _, err := s.Open(ctx, "absent"); syncerr.CodeOf(err) != syncerr.NotFound {
				t.Fatalf("Open of an absent segment: %v, want not found", err)
			}
			b := bytes.Repeat([]byte("x"), 5<<20)
			p := ports.SegmentPublication{SegmentKey: ports.SegmentKey{Partition: "p", LogEpoch: "e", Table: "t", ScopeDigest: "gone"},
				SegmentID: contentaddr.Of(b), ByteLength: int64(len(b)), ExpiresAtMs: 100}
			if _, err := s.Put(ctx, b, p); err != nil {
				t.Fatal(err)
			}
			rc, _, err := s.Open(ctx, p.SegmentID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `DELETE FROM sync_segments`); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			if err == nil || len(got) >= len(b) {
				t.Fatalf("read of a removed segment: %d bytes, %v; want an error", len(got), err)
			}
		})
	}
}

// TestOpenTakesTheSchemaLock: on PostgreSQL, Open creates missing tables
// only under the schema lock the storage engine's migration holds (so
// nodes starting together never race on CREATE … IF NOT EXISTS), and once
// the tables exist it opens without taking the lock.
func TestOpenTakesTheSchemaLock(t *testing.T) {
	ctx := t.Context()
	st, err := postgres.Open(ctx, postgres.Options{DSN: pgtest.DSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	pool := st.DB().DB
	holder, err := pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Close() }()
	if _, err := holder.ExecContext(ctx, "SELECT pg_advisory_lock("+sqlstore.SchemaLockArgs+")", sqlstore.SchemaLockKey); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		_, err := sqlseg.Open(ctx, sqlseg.Options{DB: st.DB()})
		opened <- err
	}()
	// Open waits on the lock: its backend shows an ungranted advisory lock.
	for waiting := false; !waiting; {
		select {
		case err := <-opened:
			t.Fatalf("Open created the tables while another process held the schema lock (%v)", err)
		default:
		}
		if err := pool.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid::bigint = $1 AND objid::bigint = (hashtext(current_schema())::bigint & 4294967295))`,
			sqlstore.SchemaLockKey).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := holder.ExecContext(ctx, "SELECT pg_advisory_unlock("+sqlstore.SchemaLockArgs+")", sqlstore.SchemaLockKey); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	// The tables exist now: Open does not wait for a held lock.
	if _, err := holder.ExecContext(ctx, "SELECT pg_advisory_lock("+sqlstore.SchemaLockArgs+")", sqlstore.SchemaLockKey); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlseg.Open(ctx, sqlseg.Options{DB: st.DB()}); err != nil {
		t.Fatal(err)
	}
}

// Package sqlseg keeps segments in the sync database itself (SQLite or
// PostgreSQL), beside the storage engine's tables and over its handle:
//
//	sync_segments(segment_id PK, byte_length, created_at_ms, bytes)
//	sync_segment_publications(partition, log_epoch, tbl, schema_version,
//	  media_type, scope_digest, as_of_commit_seq, row_cursor, page_size,
//	  segment_id → sync_segments, next_row_cursor, row_count, byte_length,
//	  created_at_ms, expires_at_ms)
//
// The publication list is its own table (SPEC §5.1): a Put stores the bytes
// with an insert that does nothing when the content address exists (then
// compares the stored bytes), and records its publication with one upsert
// on the publication key, so concurrent publishers never drop each other's
// publications and one publication's refresh never touches another's.
package sqlseg

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/syncd-dev/syncd/adapters/segments/internal/catalog"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Options configure a Store.
type Options struct {
	// DB is the storage engine's write-path handle (sqlstore.Store.DB).
	DB *bun.DB
	// ReadDB, when set, serves Find, Publications and Open
	// (sqlstore.Store.ReadDB: SQLite's read pool), keeping the one SQLite
	// writer connection for writes.
	ReadDB *bun.DB
}

// Store is an in-database ports.SegmentStore.
type Store struct {
	db *sql.DB
	rd *sql.DB
	pg bool
}

var (
	_ ports.SegmentStore       = (*Store)(nil)
	_ ports.SegmentStatsReader = (*Store)(nil)
)

// Open creates the segment tables when missing and returns the store.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.DB == nil {
		return nil, errors.New("sqlseg: Options.DB is required")
	}
	s := &Store{db: o.DB.DB, rd: o.DB.DB, pg: o.DB.Dialect().Name() == dialect.PG}
	if o.ReadDB != nil {
		s.rd = o.ReadDB.DB
	}
	if err := s.createTables(ctx); err != nil {
		return nil, fmt.Errorf("sqlseg: create tables: %w", err)
	}
	return s, nil
}

// segmentObjects are the tables and indexes ddl creates.
var segmentObjects = []string{"sync_segments", "sync_segment_publications",
	"sync_segment_publications_by_segment", "sync_segment_publications_by_expiry"}

// createTables runs the DDL in one transaction under the schema lock the
// storage engine's migration holds (PostgreSQL: CREATE … IF NOT EXISTS
// is not safe against a concurrent twin; SQLite: the writer handle begins
// IMMEDIATE). A database that has every object already, as on any
// restart, takes no lock: a node never waits behind another's migration.
func (s *Store) createTables(ctx context.Context) error {
	return sqlstore.CreateSideTables(ctx, s.db, s.pg, segmentObjects, s.ddl())
}

func (s *Store) ddl() []string {
	seq, blob := "INTEGER", "BLOB"
	if s.pg {
		seq, blob = "BIGINT", "BYTEA"
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS sync_segments(
  segment_id TEXT PRIMARY KEY,
  byte_length ` + seq + ` NOT NULL,
  created_at_ms ` + seq + ` NOT NULL,
  bytes ` + blob + ` NOT NULL
)`,
		`CREATE TABLE IF NOT EXISTS sync_segment_publications(
  partition TEXT NOT NULL, log_epoch TEXT NOT NULL, tbl TEXT NOT NULL,
  schema_version INTEGER NOT NULL, media_type INTEGER NOT NULL,
  scope_digest TEXT NOT NULL, as_of_commit_seq ` + seq + ` NOT NULL,
  row_cursor TEXT NOT NULL, page_size INTEGER NOT NULL,
  segment_id TEXT NOT NULL REFERENCES sync_segments(segment_id) ON DELETE CASCADE,
  next_row_cursor TEXT NOT NULL, row_count ` + seq + ` NOT NULL,
  byte_length ` + seq + ` NOT NULL, created_at_ms ` + seq + ` NOT NULL,
  expires_at_ms ` + seq + ` NOT NULL,
  PRIMARY KEY(partition, log_epoch, tbl, schema_version, media_type, scope_digest,
    as_of_commit_seq, row_cursor, page_size, segment_id)
)`,
		`CREATE INDEX IF NOT EXISTS sync_segment_publications_by_segment
  ON sync_segment_publications(segment_id)`,
		`CREATE INDEX IF NOT EXISTS sync_segment_publications_by_expiry
  ON sync_segment_publications(expires_at_ms)`,
	}
}

// q rewrites '?' placeholders for PostgreSQL.
func (s *Store) q(query string) string {
	if !s.pg {
		return query
	}
	return sqlstore.NumberPlaceholders(query)
}

const pubColumns = `partition, log_epoch, tbl, schema_version, media_type, scope_digest,
  as_of_commit_seq, row_cursor, page_size, segment_id, next_row_cursor, row_count,
  byte_length, created_at_ms, expires_at_ms`

type scanner interface{ Scan(dest ...any) error }

func scanPub(r scanner) (ports.SegmentPublication, error) {
	var p ports.SegmentPublication
	var mt int64
	err := r.Scan(&p.Partition, &p.LogEpoch, &p.Table, &p.SchemaVersion, &mt, &p.ScopeDigest,
		&p.AsOfCommitSeq, &p.RowCursor, &p.PageSize, &p.SegmentID, &p.NextRowCursor, &p.RowCount,
		&p.ByteLength, &p.CreatedAtMs, &p.ExpiresAtMs)
	p.MediaType = ports.SegmentMediaType(mt)
	return p, err
}

// Put implements ports.SegmentPublisher.
func (s *Store) Put(ctx context.Context, b []byte, p ports.SegmentPublication) (ports.SegmentPublication, error) {
	if err := catalog.Check(b, p); err != nil {
		return ports.SegmentPublication{}, err
	}
	p.ByteLength = int64(len(b))
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return ports.SegmentPublication{}, fmt.Errorf("sqlseg: put: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, s.q(`INSERT INTO sync_segments(segment_id, byte_length, created_at_ms, bytes)
VALUES(?, ?, ?, ?) ON CONFLICT(segment_id) DO NOTHING`), p.SegmentID, p.ByteLength, p.CreatedAtMs, b)
	if err != nil {
		return ports.SegmentPublication{}, fmt.Errorf("sqlseg: put segment: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return ports.SegmentPublication{}, fmt.Errorf("sqlseg: put segment: %w", err)
	} else if n == 0 {
		var stored []byte
		if err := tx.QueryRowContext(ctx, s.q(`SELECT bytes FROM sync_segments WHERE segment_id = ?`), p.SegmentID).Scan(&stored); err != nil {
			return ports.SegmentPublication{}, fmt.Errorf("sqlseg: read stored segment: %w", err)
		}
		if !bytes.Equal(stored, b) {
			return ports.SegmentPublication{}, ports.ErrSegmentCollision
		}
	}
	row := tx.QueryRowContext(ctx, s.q(`INSERT INTO sync_segment_publications(`+pubColumns+`)
VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(partition, log_epoch, tbl, schema_version, media_type, scope_digest,
  as_of_commit_seq, row_cursor, page_size, segment_id) DO UPDATE SET
  next_row_cursor = excluded.next_row_cursor,
  row_count = excluded.row_count,
  byte_length = excluded.byte_length,
  created_at_ms = CASE WHEN sync_segment_publications.created_at_ms < excluded.created_at_ms
    THEN sync_segment_publications.created_at_ms ELSE excluded.created_at_ms END,
  expires_at_ms = CASE WHEN sync_segment_publications.expires_at_ms > excluded.expires_at_ms
    THEN sync_segment_publications.expires_at_ms ELSE excluded.expires_at_ms END
RETURNING `+pubColumns),
		p.Partition, p.LogEpoch, p.Table, p.SchemaVersion, int64(p.MediaType), p.ScopeDigest,
		p.AsOfCommitSeq, p.RowCursor, p.PageSize, p.SegmentID, p.NextRowCursor, p.RowCount,
		p.ByteLength, p.CreatedAtMs, p.ExpiresAtMs)
	stored, err := scanPub(row)
	if err != nil {
		return ports.SegmentPublication{}, fmt.Errorf("sqlseg: put publication: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return ports.SegmentPublication{}, fmt.Errorf("sqlseg: put: %w", err)
	}
	return stored, nil
}

// Find implements ports.SegmentPublisher.
func (s *Store) Find(ctx context.Context, k ports.SegmentKey, nowMs int64) (ports.SegmentPublication, bool, error) {
	row := s.rd.QueryRowContext(ctx, s.q(`SELECT `+pubColumns+` FROM sync_segment_publications
WHERE partition = ? AND log_epoch = ? AND tbl = ? AND schema_version = ? AND media_type = ?
  AND scope_digest = ? AND as_of_commit_seq = ? AND row_cursor = ? AND page_size = ?
  AND expires_at_ms > ?
ORDER BY created_at_ms DESC, segment_id DESC LIMIT 1`),
		k.Partition, k.LogEpoch, k.Table, k.SchemaVersion, int64(k.MediaType), k.ScopeDigest,
		k.AsOfCommitSeq, k.RowCursor, k.PageSize, nowMs)
	p, err := scanPub(row)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.SegmentPublication{}, false, nil
	}
	if err != nil {
		return ports.SegmentPublication{}, false, fmt.Errorf("sqlseg: find: %w", err)
	}
	return p, true, nil
}

// Publications implements ports.SegmentSource.
func (s *Store) Publications(ctx context.Context, id string) ([]ports.SegmentPublication, error) {
	rows, err := s.rd.QueryContext(ctx, s.q(`SELECT `+pubColumns+` FROM sync_segment_publications
WHERE segment_id = ? ORDER BY created_at_ms, partition, log_epoch, tbl, scope_digest`), id)
	if err != nil {
		return nil, fmt.Errorf("sqlseg: publications: %w", err)
	}
	defer rows.Close()
	var out []ports.SegmentPublication
	for rows.Next() {
		p, err := scanPub(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlseg: publications: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlseg: publications: %w", err)
	}
	return out, nil
}

// How many bytes of a segment one read fetches. PostgreSQL reads a slice
// of a TOASTed value without the rest; SQLite's substr loads the whole
// blob from its overflow pages on every call, so its chunks are larger
// (a 4.5 MB segment: ~14 ms of CPU to read in 512 KiB chunks, ~8 ms in
// 2 MiB ones).
const (
	openChunkPG     = 512 << 10
	openChunkSQLite = 2 << 20
)

// Open implements ports.SegmentSource. The bytes are read in chunks, one
// statement each on the read pool (no connection is held between chunks),
// so a download holds one chunk rather than the whole segment: each chunk
// is scanned as sql.RawBytes (no database/sql clone) and copied once into
// the reader's reused buffer. The first chunk is read here, so a missing
// segment is refused before any byte goes out. A segment swept between two
// chunks fails the read (the download is cut).
func (s *Store) Open(ctx context.Context, id string) (io.ReadCloser, int64, error) {
	chunk := int64(openChunkSQLite)
	if s.pg {
		chunk = openChunkPG
	}
	r := &segmentReader{ctx: ctx, db: s.rd, id: id, size: -1, chunk: chunk, query: s.q(s.chunkQuery())}
	found, err := r.fetch()
	if err != nil {
		return nil, 0, fmt.Errorf("sqlseg: open: %w", err)
	}
	if !found {
		return nil, 0, syncerr.New(syncerr.NotFound).WithMessage("segment not found")
	}
	return r, r.size, nil
}

// chunkQuery reads the stored length and up to ? bytes from offset ?
// (1-based) of a segment's bytes.
func (s *Store) chunkQuery() string {
	if s.pg {
		return `SELECT byte_length, substring(bytes FROM ? FOR ?) FROM sync_segments WHERE segment_id = ?`
	}
	return `SELECT byte_length, substr(bytes, ?, ?) FROM sync_segments WHERE segment_id = ?`
}

// chunkBufs holds the chunk buffers of finished downloads (*[]byte), so a
// storm of downloads reuses a few buffers instead of one per download.
var chunkBufs sync.Pool

// segmentReader streams a stored segment chunk by chunk.
type segmentReader struct {
	ctx   context.Context
	db    *sql.DB
	id    string
	query string
	chunk int64
	size  int64 // the stored byte_length; -1 before the first chunk
	off   int64 // bytes fetched so far
	buf   []byte
	pos   int
}

// fetch reads the next chunk into buf; found is false when the segment
// is absent.
func (r *segmentReader) fetch() (found bool, err error) {
	want := r.chunk
	if r.size >= 0 {
		want = min(want, r.size-r.off)
	}
	rows, err := r.db.QueryContext(r.ctx, r.query, r.off+1, want, r.id)
	if err != nil {
		return false, err
	}
	defer func() { _ = rows.Close() }()
	if !rows.Next() {
		return false, rows.Err()
	}
	var size int64
	var b sql.RawBytes
	if err := rows.Scan(&size, &b); err != nil {
		return false, err
	}
	if r.size < 0 {
		r.size = size
		want = min(want, size)
	}
	if size != r.size || int64(len(b)) != want {
		return false, fmt.Errorf("segment %s: read %d bytes at %d of %d, want %d", r.id, len(b), r.off, size, want)
	}
	if r.buf == nil && want >= r.chunk {
		if p, ok := chunkBufs.Get().(*[]byte); ok && int64(cap(*p)) >= want {
			r.buf = *p
		}
	}
	r.buf = append(r.buf[:0], b...)
	r.pos = 0
	r.off += want
	return true, rows.Close()
}

// next makes buf hold unread bytes; io.EOF at the end.
func (r *segmentReader) next() error {
	if r.buf == nil && r.size < 0 {
		return errors.New("sqlseg: read of a closed segment")
	}
	if r.pos < len(r.buf) {
		return nil
	}
	if r.off >= r.size {
		return io.EOF
	}
	found, err := r.fetch()
	if err == nil && !found {
		err = fmt.Errorf("segment %s removed during the read", r.id)
	}
	if err != nil {
		return fmt.Errorf("sqlseg: read: %w", err)
	}
	return nil
}

// Read implements io.Reader.
func (r *segmentReader) Read(p []byte) (int, error) {
	if err := r.next(); err != nil {
		return 0, err
	}
	n := copy(p, r.buf[r.pos:])
	r.pos += n
	return n, nil
}

// WriteTo implements io.WriterTo: each chunk goes to w in one write.
func (r *segmentReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.next(); err == io.EOF {
			return total, nil
		} else if err != nil {
			return total, err
		}
		n, err := w.Write(r.buf[r.pos:])
		r.pos += n
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
}

// Close implements io.Closer and returns a full-size chunk buffer to the
// pool (no reader or writer keeps it: io.Writer does not retain p).
func (r *segmentReader) Close() error {
	if int64(cap(r.buf)) >= r.chunk {
		b := r.buf[:0]
		chunkBufs.Put(&b)
	}
	r.buf, r.pos, r.size = nil, 0, -1
	return nil
}

// Sweep implements ports.SegmentSweeper. A publication recorded while its
// segment is being swept can lose that race (the cascade removes it); the
// next pull then rebuilds the segment, which is what a cache miss costs.
func (s *Store) Sweep(ctx context.Context, beforeMs int64) (ports.SegmentSweep, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return ports.SegmentSweep{}, fmt.Errorf("sqlseg: sweep: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, s.q(`DELETE FROM sync_segment_publications WHERE expires_at_ms <= ?`), beforeMs)
	if err != nil {
		return ports.SegmentSweep{}, fmt.Errorf("sqlseg: sweep publications: %w", err)
	}
	pubs, _ := res.RowsAffected()
	res, err = tx.ExecContext(ctx, `DELETE FROM sync_segments WHERE NOT EXISTS (
  SELECT 1 FROM sync_segment_publications p WHERE p.segment_id = sync_segments.segment_id)`)
	if err != nil {
		return ports.SegmentSweep{}, fmt.Errorf("sqlseg: sweep segments: %w", err)
	}
	segs, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		return ports.SegmentSweep{}, fmt.Errorf("sqlseg: sweep: %w", err)
	}
	return ports.SegmentSweep{Publications: pubs, Segments: segs}, nil
}

// SegmentStats implements ports.SegmentStatsReader: two aggregate reads
// over the catalog columns (the segment bytes are never read).
func (s *Store) SegmentStats(ctx context.Context, nowMs int64) (ports.SegmentStats, error) {
	var st ports.SegmentStats
	if err := s.rd.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(byte_length), 0) FROM sync_segments`).
		Scan(&st.Segments, &st.Bytes); err != nil {
		return ports.SegmentStats{}, fmt.Errorf("sqlseg: stats: %w", err)
	}
	if err := s.rd.QueryRowContext(ctx, s.q(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN expires_at_ms <= ? THEN 1 ELSE 0 END), 0)
FROM sync_segment_publications`), nowMs).Scan(&st.Publications, &st.ExpiredPublications); err != nil {
		return ports.SegmentStats{}, fmt.Errorf("sqlseg: stats: %w", err)
	}
	return st, nil
}

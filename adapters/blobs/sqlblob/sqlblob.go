// Package sqlblob keeps blobs (SPEC §5.9) in the sync database itself
// (SQLite or PostgreSQL), beside the storage engine's tables and over its
// handles:
//
//	sync_blobs(partition, blob_id, upload_id, byte_length, chunk_size,
//	  media_type, created_at_ms)          one row per published blob
//	sync_blob_uploads(upload_id, started_at_ms)
//	                                      uploads staged, not yet published
//	sync_blob_chunks(upload_id, seq, bytes)
//	                                      the bytes, chunk_size bytes a row
//
// Bytes are stored in chunks keyed by the upload that wrote them, never by
// the blob id: a blob is published by inserting its one sync_blobs row
// pointing at its upload, in a short transaction, so publishing never
// rewrites the bytes (SQLite rewrites a whole row on any update, blobs
// included) and a body is visible only once its content address was
// verified.
//
// A body that fits in one chunk is written with its metadata row in one
// transaction. A longer body is staged: its upload row and first chunk in
// one transaction, every further chunk in a statement of its own as it
// arrives, the publication in a last one. So no transaction, and on SQLite
// no hold on the one write lock, lasts longer than one chunk's insert,
// however slowly the body streams, and a Put holds one chunk in memory.
// A refused body (hash, length, cap, cancellation) deletes its chunks; a
// crash leaves an upload row, swept once it is older than
// Options.StaleUploadAfter on the app clock (Put runs the sweep at most
// hourly, judged by the times uploads carry).
//
// Concurrent Puts of one blob each stage their own upload; the first
// publication wins (insert-or-nothing on the blob key) and the others
// delete their chunks and return the winner's info with created false.
package sqlblob

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/syncd-dev/syncd/adapters/blobs/internal/blobio"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Defaults of Options.
const (
	// DefaultChunkSize balances statements per blob against the memory a
	// Put or an Open holds and the bytes a small range read fetches.
	DefaultChunkSize = 1 << 20
	// DefaultStaleUploadAfter is how old a staged upload must be before
	// a sweep takes it for abandoned.
	DefaultStaleUploadAfter = 24 * time.Hour
	// MaxChunkSize bounds Options.ChunkSize.
	MaxChunkSize = 64 << 20
)

// sweepEvery spaces the sweeps of abandoned uploads.
const sweepEvery = time.Hour

// Options configure a Store.
type Options struct {
	// DB is the storage engine's write-path handle (sqlstore.Store.DB).
	DB *bun.DB
	// ReadDB, when set, serves Stat, Open and ListCreatedBefore
	// (sqlstore.Store.ReadDB: SQLite's read pool).
	ReadDB *bun.DB
	// ChunkSize is the bytes per stored chunk (default DefaultChunkSize).
	// It applies to blobs written from now on; each blob records its own.
	ChunkSize int
	// StaleUploadAfter is the age past which a staged, unpublished upload
	// is swept (default DefaultStaleUploadAfter).
	StaleUploadAfter time.Duration
}

// Store is an in-database ports.BlobStore.
type Store struct {
	db      *sql.DB
	rd      *sql.DB
	pg      bool
	chunk   int
	staleMs int64
	sweep   blobio.SweepGate
	bufs    sync.Pool // *[]byte of cap chunk
}

var (
	_ ports.BlobStore   = (*Store)(nil)
	_ ports.BlobBuffers = (*Store)(nil)
)

// Open creates the blob tables when missing and returns the store.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.DB == nil {
		return nil, errors.New("sqlblob: Options.DB is required")
	}
	if o.ChunkSize < 0 || o.ChunkSize > MaxChunkSize {
		return nil, fmt.Errorf("sqlblob: Options.ChunkSize %d outside 1..%d", o.ChunkSize, MaxChunkSize)
	}
	s := &Store{db: o.DB.DB, rd: o.DB.DB, pg: o.DB.Dialect().Name() == dialect.PG,
		chunk: o.ChunkSize, staleMs: o.StaleUploadAfter.Milliseconds()}
	if o.ReadDB != nil {
		s.rd = o.ReadDB.DB
	}
	if s.chunk == 0 {
		s.chunk = DefaultChunkSize
	}
	if s.staleMs <= 0 {
		s.staleMs = DefaultStaleUploadAfter.Milliseconds()
	}
	if err := s.createTables(ctx); err != nil {
		return nil, fmt.Errorf("sqlblob: create tables: %w", err)
	}
	return s, nil
}

// blobObjects are the tables and indexes ddl creates.
var blobObjects = []string{"sync_blobs", "sync_blob_uploads", "sync_blob_uploads_by_start", "sync_blob_chunks"}

// createTables runs the DDL in one transaction under the schema lock the
// storage engine's migration holds (as the segment store does); a
// database that has every object already takes no lock.
func (s *Store) createTables(ctx context.Context) error {
	return sqlstore.CreateSideTables(ctx, s.db, s.pg, blobObjects, s.ddl())
}

func (s *Store) ddl() []string {
	seq, blob, text := "INTEGER", "BLOB", "TEXT"
	if s.pg {
		// COLLATE "C": blob ids page in byte order, as on SQLite.
		seq, blob, text = "BIGINT", "BYTEA", `TEXT COLLATE "C"`
	}
	q := []string{
		`CREATE TABLE IF NOT EXISTS sync_blobs(
  partition ` + text + ` NOT NULL,
  blob_id ` + text + ` NOT NULL,
  upload_id TEXT NOT NULL,
  byte_length ` + seq + ` NOT NULL,
  chunk_size INTEGER NOT NULL,
  media_type TEXT NOT NULL,
  created_at_ms ` + seq + ` NOT NULL,
  PRIMARY KEY(partition, blob_id)
)`,
		`CREATE TABLE IF NOT EXISTS sync_blob_uploads(
  upload_id TEXT PRIMARY KEY,
  started_at_ms ` + seq + ` NOT NULL
)`,
		`CREATE INDEX IF NOT EXISTS sync_blob_uploads_by_start ON sync_blob_uploads(started_at_ms)`,
		`CREATE TABLE IF NOT EXISTS sync_blob_chunks(
  upload_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  bytes ` + blob + ` NOT NULL,
  PRIMARY KEY(upload_id, seq)
)`,
	}
	if s.pg {
		// Out of line and uncompressed: blobs are mostly compressed media
		// already, and compression would cost CPU on every write and read.
		q = append(q, `ALTER TABLE sync_blob_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL`)
	}
	return q
}

// q rewrites '?' placeholders for PostgreSQL.
func (s *Store) q(query string) string {
	if !s.pg {
		return query
	}
	return sqlstore.NumberPlaceholders(query)
}

func internal(op string, err error) error { return blobio.Internal("sqlblob", op, err) }

func (s *Store) getBuf() *[]byte {
	if p, ok := s.bufs.Get().(*[]byte); ok && cap(*p) >= s.chunk {
		return p
	}
	b := make([]byte, s.chunk)
	return &b
}

func newUploadID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Put implements ports.BlobStore.
func (s *Store) Put(ctx context.Context, u ports.BlobUpload, r io.Reader) (ports.BlobInfo, bool, error) {
	if err := blobio.Check(u); err != nil {
		return ports.BlobInfo{}, false, err
	}
	if info, ok, err := s.Stat(ctx, u.Partition, u.BlobID); err != nil || ok {
		return info, false, err
	}
	s.sweepStale(ctx, u.CreatedAtMs)
	id, err := newUploadID()
	if err != nil {
		return ports.BlobInfo{}, false, internal("put", err)
	}
	v := blobio.NewVerifier(ctx, r, u)
	c := chunker{r: v}
	var buf []byte
	if u.ByteLength >= 0 && u.ByteLength < int64(s.chunk) {
		// A body declared shorter than a chunk gets a buffer of its
		// size (one byte more is refused by the verifier), so small
		// uploads hold what PutBufferBytes says, not a whole chunk.
		buf = make([]byte, u.ByteLength)
	} else {
		bp := s.getBuf()
		defer s.bufs.Put(bp)
		buf = (*bp)[:s.chunk]
	}

	n, last, err := c.next(buf)
	if err != nil {
		return ports.BlobInfo{}, false, bodyErr(err)
	}
	if last {
		if err := v.Finish(); err != nil {
			return ports.BlobInfo{}, false, err
		}
		return s.publish(ctx, u, id, v.Count(), buf[:n])
	}
	if err := s.stage(ctx, id, u.CreatedAtMs, buf[:n]); err != nil {
		return ports.BlobInfo{}, false, internal("stage", err)
	}
	info, created, err := s.streamStaged(ctx, u, id, v, &c, buf)
	if err != nil {
		s.discard(ctx, id)
	}
	return info, created, err
}

// PutBufferBytes implements ports.BlobBuffers: a Put holds one chunk
// (the body's declared length when shorter), and the driver copies it
// once more while its statement runs.
func (s *Store) PutBufferBytes(u ports.BlobUpload) int64 {
	n := int64(s.chunk)
	if u.ByteLength >= 0 {
		n = min(n, u.ByteLength)
	}
	return 2 * n
}

// OpenBufferBytes implements ports.BlobBuffers: a reader holds the part
// of one chunk it fetched, and the driver's copy of it while the fetch
// runs. A blob written with a larger chunk size than the store's holds
// that chunk size instead (Options.ChunkSize changed since).
func (s *Store) OpenBufferBytes(_ ports.BlobInfo, length int64) int64 {
	n := int64(s.chunk)
	if length >= 0 {
		n = min(n, length)
	}
	return 2 * n
}

// streamStaged writes the chunks after the first of a staged upload, then
// publishes it.
func (s *Store) streamStaged(ctx context.Context, u ports.BlobUpload, id string, v *blobio.Verifier, c *chunker, buf []byte) (ports.BlobInfo, bool, error) {
	ins := s.q(`INSERT INTO sync_blob_chunks(upload_id, seq, bytes) VALUES(?, ?, ?)`)
	for seq, last := 1, false; !last; seq++ {
		var n int
		var err error
		if n, last, err = c.next(buf); err != nil {
			return ports.BlobInfo{}, false, bodyErr(err)
		}
		if n == 0 {
			break
		}
		if _, err := s.db.ExecContext(ctx, ins, id, seq, buf[:n]); err != nil {
			return ports.BlobInfo{}, false, internal("put chunk", err)
		}
	}
	if err := v.Finish(); err != nil {
		return ports.BlobInfo{}, false, err
	}
	return s.publish(ctx, u, id, v.Count(), nil)
}

// bodyErr keeps a blob.* refusal and wraps anything else the body's
// reader failed with.
func bodyErr(err error) error {
	if syncerr.CodeOf(err) != "" {
		return err
	}
	return internal("read body", err)
}

// stage records a staged upload with its first chunk.
func (s *Store) stage(ctx context.Context, id string, startedAtMs int64, first []byte) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO sync_blob_uploads(upload_id, started_at_ms) VALUES(?, ?)`), id, startedAtMs); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO sync_blob_chunks(upload_id, seq, bytes) VALUES(?, 0, ?)`), id, first); err != nil {
		return err
	}
	return tx.Commit()
}

// publish makes a verified upload the blob u names. only, when set, is
// the whole body (one chunk, written here); otherwise the upload was
// staged and its staging row is consumed (its absence means a sweep took
// it: the Put fails). When another Put published the blob first, this
// upload's chunks go and the stored blob's info comes back.
func (s *Store) publish(ctx context.Context, u ports.BlobUpload, id string, length int64, only []byte) (ports.BlobInfo, bool, error) {
	info := ports.BlobInfo{Partition: u.Partition, BlobID: u.BlobID, ByteLength: length, MediaType: u.MediaType, CreatedAtMs: u.CreatedAtMs}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return ports.BlobInfo{}, false, internal("publish", err)
	}
	defer func() { _ = tx.Rollback() }()
	if only == nil {
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM sync_blob_uploads WHERE upload_id = ?`), id)
		if err != nil {
			return ports.BlobInfo{}, false, internal("publish", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return ports.BlobInfo{}, false, internal("publish", errors.Join(blobio.ErrStagingLost, err))
		}
	} else if len(only) > 0 {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO sync_blob_chunks(upload_id, seq, bytes) VALUES(?, 0, ?)`), id, only); err != nil {
			return ports.BlobInfo{}, false, internal("publish", err)
		}
	}
	res, err := tx.ExecContext(ctx, s.q(`INSERT INTO sync_blobs(partition, blob_id, upload_id, byte_length, chunk_size, media_type, created_at_ms)
VALUES(?, ?, ?, ?, ?, ?, ?) ON CONFLICT(partition, blob_id) DO NOTHING`),
		u.Partition, u.BlobID, id, length, s.chunk, u.MediaType, u.CreatedAtMs)
	if err != nil {
		return ports.BlobInfo{}, false, internal("publish", err)
	}
	created := true
	if n, err := res.RowsAffected(); err != nil {
		return ports.BlobInfo{}, false, internal("publish", err)
	} else if n == 0 {
		created = false
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sync_blob_chunks WHERE upload_id = ?`), id); err != nil {
			return ports.BlobInfo{}, false, internal("publish", err)
		}
		row := tx.QueryRowContext(ctx, s.q(`SELECT byte_length, media_type, created_at_ms FROM sync_blobs WHERE partition = ? AND blob_id = ?`),
			u.Partition, u.BlobID)
		if err := row.Scan(&info.ByteLength, &info.MediaType, &info.CreatedAtMs); err != nil {
			return ports.BlobInfo{}, false, internal("publish", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return ports.BlobInfo{}, false, internal("publish", err)
	}
	return info, created, nil
}

// discard deletes a refused upload's chunks and staging row, even when
// ctx was cancelled (what it leaves behind the stale sweep removes).
func (s *Store) discard(ctx context.Context, id string) {
	ctx = context.WithoutCancel(ctx)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sync_blob_chunks WHERE upload_id = ?`), id); err != nil {
		return
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sync_blob_uploads WHERE upload_id = ?`), id); err != nil {
		return
	}
	_ = tx.Commit()
}

// sweepStale removes uploads staged more than StaleUploadAfter before
// nowMs and never published (a crashed or killed process), at most once
// per sweepEvery. A failure waits for the next turn.
func (s *Store) sweepStale(ctx context.Context, nowMs int64) {
	if !s.sweep.Due(nowMs, sweepEvery.Milliseconds()) {
		return
	}
	before := nowMs - s.staleMs
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sync_blob_chunks WHERE upload_id IN (
  SELECT upload_id FROM sync_blob_uploads WHERE started_at_ms < ?)`), before); err != nil {
		return
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sync_blob_uploads WHERE started_at_ms < ?`), before); err != nil {
		return
	}
	_ = tx.Commit()
}

// chunker cuts a body into chunks, looking one byte ahead so the chunk
// that ends the body is known as the last.
type chunker struct {
	r       io.Reader
	peek    [1]byte
	hasPeek bool
}

// next fills buf; last is true when the body ends with these n bytes.
func (c *chunker) next(buf []byte) (n int, last bool, err error) {
	if c.hasPeek {
		buf[0] = c.peek[0]
		n, c.hasPeek = 1, false
	}
	m, err := io.ReadFull(c.r, buf[n:])
	n += m
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return n, true, nil
	}
	if err != nil {
		return n, false, err
	}
	if _, err := io.ReadFull(c.r, c.peek[:]); err == io.EOF {
		return n, true, nil
	} else if err != nil {
		return n, false, err
	}
	c.hasPeek = true
	return n, false, nil
}

// Stat implements ports.BlobStore.
func (s *Store) Stat(ctx context.Context, partition, blobID string) (ports.BlobInfo, bool, error) {
	info := ports.BlobInfo{Partition: partition, BlobID: blobID}
	err := s.rd.QueryRowContext(ctx, s.q(`SELECT byte_length, media_type, created_at_ms FROM sync_blobs WHERE partition = ? AND blob_id = ?`),
		partition, blobID).Scan(&info.ByteLength, &info.MediaType, &info.CreatedAtMs)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.BlobInfo{}, false, nil
	}
	if err != nil {
		return ports.BlobInfo{}, false, internal("stat", err)
	}
	return info, true, nil
}

// Open implements ports.BlobStore. The range is read chunk by chunk, one
// statement each on the read pool (no connection is held between
// chunks), fetching only the chunks it covers; a blob deleted between two
// chunks fails the read.
func (s *Store) Open(ctx context.Context, partition, blobID string, offset, length int64) (io.ReadCloser, ports.BlobInfo, error) {
	info := ports.BlobInfo{Partition: partition, BlobID: blobID}
	var uploadID string
	var chunk int64
	err := s.rd.QueryRowContext(ctx, s.q(`SELECT upload_id, byte_length, chunk_size, media_type, created_at_ms FROM sync_blobs
WHERE partition = ? AND blob_id = ?`), partition, blobID).Scan(&uploadID, &info.ByteLength, &chunk, &info.MediaType, &info.CreatedAtMs)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ports.BlobInfo{}, blobio.NotFound()
	}
	if err != nil {
		return nil, ports.BlobInfo{}, internal("open", err)
	}
	off, n, err := blobio.Range(info.ByteLength, offset, length)
	if err != nil {
		return nil, ports.BlobInfo{}, err
	}
	return &chunkReader{s: s, ctx: ctx, upload: uploadID, chunk: chunk, size: info.ByteLength,
		pos: off, end: off + n, query: s.q(s.chunkQuery())}, info, nil
}

// chunkQuery reads ? bytes from offset ? (1-based) of chunk ? of upload ?.
func (s *Store) chunkQuery() string {
	if s.pg {
		return `SELECT substring(bytes FROM ? FOR ?) FROM sync_blob_chunks WHERE upload_id = ? AND seq = ?`
	}
	return `SELECT substr(bytes, ?, ?) FROM sync_blob_chunks WHERE upload_id = ? AND seq = ?`
}

// chunkReader streams a byte range of a stored blob.
type chunkReader struct {
	s      *Store
	ctx    context.Context
	upload string
	query  string
	chunk  int64
	size   int64
	pos    int64 // next byte to hand out
	end    int64 // one past the last byte of the range
	bp     *[]byte
	buf    []byte // fetched bytes holding pos, from bufAt
	bufAt  int64
	closed bool
}

// next makes buf hold the byte at pos; io.EOF past the range. It fetches
// the part of pos's chunk the range covers (PostgreSQL reads just those
// slices of the out-of-line value; SQLite loads the chunk but hands over
// only the part).
func (r *chunkReader) next() error {
	if r.closed {
		return errors.New("sqlblob: read of a closed blob")
	}
	if r.pos >= r.end {
		return io.EOF
	}
	if r.pos >= r.bufAt && r.pos < r.bufAt+int64(len(r.buf)) {
		return nil
	}
	seq := r.pos / r.chunk
	from := r.pos - seq*r.chunk
	want := min(r.end, (seq+1)*r.chunk) - r.pos
	rows, err := r.s.rd.QueryContext(r.ctx, r.query, from+1, want, r.upload, seq)
	if err != nil {
		return internal("read", err)
	}
	defer func() { _ = rows.Close() }()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return internal("read", err)
		}
		return internal("read", fmt.Errorf("chunk %d of upload %s is gone (blob deleted during the read)", seq, r.upload))
	}
	var b sql.RawBytes
	if err := rows.Scan(&b); err != nil {
		return internal("read", err)
	}
	if int64(len(b)) != want {
		return internal("read", fmt.Errorf("chunk %d of upload %s: %d bytes at %d, want %d", seq, r.upload, len(b), from, want))
	}
	if r.bp == nil {
		if n := r.end - r.pos; n < int64(r.s.chunk) {
			// A range shorter than a chunk holds only its own bytes
			// (OpenBufferBytes), not a pooled chunk.
			b := make([]byte, 0, n)
			r.bp = &b
		} else {
			r.bp = r.s.getBuf()
		}
	}
	r.buf = append((*r.bp)[:0], b...)
	r.bufAt = r.pos
	return rows.Close()
}

// window is the part of buf inside the range from pos.
func (r *chunkReader) window() []byte {
	return r.buf[r.pos-r.bufAt : min(r.end-r.bufAt, int64(len(r.buf)))]
}

// Read implements io.Reader.
func (r *chunkReader) Read(p []byte) (int, error) {
	if err := r.next(); err != nil {
		return 0, err
	}
	n := copy(p, r.window())
	r.pos += int64(n)
	return n, nil
}

// WriteTo implements io.WriterTo: each chunk goes to w in one write.
func (r *chunkReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.next(); err == io.EOF {
			return total, nil
		} else if err != nil {
			return total, err
		}
		n, err := w.Write(r.window())
		r.pos += int64(n)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
}

// Close implements io.Closer and returns the chunk buffer to the pool.
func (r *chunkReader) Close() error {
	if r.bp != nil && !r.closed && cap(*r.bp) >= r.s.chunk {
		*r.bp = (*r.bp)[:0]
		r.s.bufs.Put(r.bp)
	}
	r.bp, r.buf, r.closed = nil, nil, true
	return nil
}

// ListCreatedBefore implements ports.BlobStore.
func (s *Store) ListCreatedBefore(ctx context.Context, partition string, beforeMs int64, after string, limit int) ([]ports.BlobInfo, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.rd.QueryContext(ctx, s.q(`SELECT blob_id, byte_length, media_type, created_at_ms FROM sync_blobs
WHERE partition = ? AND blob_id > ? AND created_at_ms < ? ORDER BY blob_id LIMIT ?`), partition, after, beforeMs, limit)
	if err != nil {
		return nil, internal("list", err)
	}
	defer func() { _ = rows.Close() }()
	var out []ports.BlobInfo
	for rows.Next() {
		info := ports.BlobInfo{Partition: partition}
		if err := rows.Scan(&info.BlobID, &info.ByteLength, &info.MediaType, &info.CreatedAtMs); err != nil {
			return nil, internal("list", err)
		}
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, internal("list", err)
	}
	return out, nil
}

// Delete implements ports.BlobStore: the blob row and its chunks go in
// one transaction.
func (s *Store) Delete(ctx context.Context, partition, blobID string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return internal("delete", err)
	}
	defer func() { _ = tx.Rollback() }()
	var uploadID string
	err = tx.QueryRowContext(ctx, s.q(`DELETE FROM sync_blobs WHERE partition = ? AND blob_id = ? RETURNING upload_id`),
		partition, blobID).Scan(&uploadID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return internal("delete", err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sync_blob_chunks WHERE upload_id = ?`), uploadID); err != nil {
		return internal("delete", err)
	}
	if err := tx.Commit(); err != nil {
		return internal("delete", err)
	}
	return nil
}

package ports

import (
	"context"
	"errors"
	"io"

	"github.com/syncd-dev/syncd/domain/schema"
)

// SegmentMediaType is a segment's format (SPEC §5.4 mediaType).
type SegmentMediaType uint8

// Segment media types.
const (
	SegmentRows   SegmentMediaType = 1 // SSG2 rows segment (§5.2)
	SegmentSQLite SegmentMediaType = 2 // SQLite image (§5.3)
)

// SegmentKey is one publication context (SPEC §5.1): the reuse key a
// bootstrap looks a built segment up by, and the identity under which a
// publication merges. Two publications of one content address differ in at
// least one field.
type SegmentKey struct {
	Partition     string
	LogEpoch      string
	Table         string
	SchemaVersion int32
	MediaType     SegmentMediaType
	// ScopeDigest is the §3.5 digest of the effective scopes the rows
	// were selected by.
	ScopeDigest   string
	AsOfCommitSeq int64
	// RowCursor is the exclusive row id the page starts after; "" is the
	// first page (row ids are never empty).
	RowCursor string
	// PageSize is the row limit the page was cut with (0 for a sqlite
	// image, which is never paged).
	PageSize int
}

// SegmentPublication is one publication of a stored segment: its context,
// the page continuation and its own lifetime.
type SegmentPublication struct {
	SegmentKey
	// SegmentID is the content address of the uncompressed bytes.
	SegmentID string
	// NextRowCursor continues the table after this page; "" on the last page.
	NextRowCursor string
	RowCount      int64
	ByteLength    int64
	CreatedAtMs   int64
	ExpiresAtMs   int64
}

// Expired reports whether the publication has expired at nowMs.
func (p SegmentPublication) Expired(nowMs int64) bool { return p.ExpiresAtMs <= nowMs }

// ErrSegmentCollision is returned by Put when bytes differ from those
// already stored under the same content address: a hash collision or a
// corrupted store. It must fail loudly, never overwrite (SPEC §5.1).
var ErrSegmentCollision = errors.New("segment bytes differ from the stored bytes under the same content address")

// ErrSegmentIDMismatch is returned by Put when the publication's SegmentID
// is not the content address of the bytes.
var ErrSegmentIDMismatch = errors.New("segment id is not the content address of the bytes")

// SegmentPublisher stores built segments and finds reusable ones (the
// bootstrap side).
type SegmentPublisher interface {
	// Put stores b under p.SegmentID unless already stored (the id must be
	// the content address of b, else ErrSegmentIDMismatch; different
	// stored bytes are ErrSegmentCollision) and records p: a publication
	// of the same segment with the same SegmentKey merges into its own
	// lifetime (p's descriptor, the earlier creation time, the later
	// expiry); a new key is appended. Other publications are never
	// touched. ByteLength is set from b.
	// Concurrent Puts of one id never lose a publication. It returns the
	// stored publication.
	Put(ctx context.Context, b []byte, p SegmentPublication) (SegmentPublication, error)
	// Find returns the unexpired publication whose key equals k (every
	// field), or ok false. When several segments were published under one
	// key (a rebuild of non-deterministic bytes), the newest wins.
	Find(ctx context.Context, k SegmentKey, nowMs int64) (p SegmentPublication, ok bool, err error)
}

// SegmentSource serves stored segments (the download side).
type SegmentSource interface {
	// Publications lists every publication recorded for id, expired ones
	// included, oldest first; an unknown id yields an empty list.
	Publications(ctx context.Context, id string) ([]SegmentPublication, error)
	// Open returns the stored bytes of id and their length; an unknown id
	// is a *syncerr.Error with code sync.not_found. The caller closes the
	// reader.
	Open(ctx context.Context, id string) (rc io.ReadCloser, size int64, err error)
}

// SegmentSweep reports one expiry pass.
type SegmentSweep struct {
	Publications int64 // publications removed
	Segments     int64 // stored segments removed (no publication left)
}

// SegmentSweeper forgets expired segments (SPEC §5.5: the expired to
// forgotten transition is legal).
type SegmentSweeper interface {
	// Sweep removes publications that expired at or before beforeMs and
	// then every stored segment left without a publication.
	Sweep(ctx context.Context, beforeMs int64) (SegmentSweep, error)
}

// SegmentStore is the segment cache of SPEC §5.1: one stored entry per
// content address, with a list of publications.
type SegmentStore interface {
	SegmentPublisher
	SegmentSource
	SegmentSweeper
}

// ImageRequest describes one SQLite image (SPEC §5.3): the table whose
// rows it holds and the descriptor duplicated in its metadata row.
type ImageRequest struct {
	Table         *schema.Table
	SchemaVersion int32
	AsOfCommitSeq int64
	ScopeDigest   string
}

// ImageBuilder writes SQLite-image segments. A server without one serves
// the images a publisher stored under a bootstrap's key and the rows lane
// otherwise (SPEC §5.3).
type ImageBuilder interface {
	// NewImage starts an image. The caller adds every row of the snapshot
	// in row-id order and then finishes or aborts it.
	NewImage(ctx context.Context, r ImageRequest) (ImageWriter, error)
}

// ImageWriter is one image being written.
type ImageWriter interface {
	// Add writes one row: its server version and full-row payload. The
	// payload is lent for the call: the writer copies what it keeps. A
	// value no image cell holds exactly is sqliteimage.ErrUnrepresentable
	// (the table is then served on the rows lane).
	Add(ctx context.Context, version int64, payload []byte) error
	// Finish writes the metadata row and returns the image bytes and the
	// row count.
	Finish(ctx context.Context) (b []byte, rows int64, err error)
	// Abort discards an unfinished image; after Finish it does nothing.
	Abort()
}

// SegmentURLRequest asks for a native signed segment URL (SPEC §5.4).
type SegmentURLRequest struct {
	SegmentID   string
	ScopeDigest string
	Partition   string
	NowMs       int64
}

// SegmentURLSigner issues the signed segment URLs a pull hands clients
// that set accept bit 3; the transport that serves the URL mints it.
type SegmentURLSigner interface {
	SignSegmentURL(ctx context.Context, r SegmentURLRequest) (url string, expiresAtMs int64, err error)
}

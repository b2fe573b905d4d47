package ports

import (
	"context"
	"io"
	"time"
)

// BlobInfo describes one stored blob (SPEC §5.9): durable, content-addressed
// bytes kept per partition.
type BlobInfo struct {
	Partition string
	// BlobID is the content address of the bytes (domain/contentaddr).
	BlobID     string
	ByteLength int64
	// MediaType is the media type the uploader declared; "" when none.
	MediaType   string
	CreatedAtMs int64
}

// BlobUpload is the request of one BlobStore.Put.
type BlobUpload struct {
	Partition string
	BlobID    string
	MediaType string
	// ByteLength is the length the uploader declared, or -1 when unknown
	// (a chunked body). A body of another length is refused
	// (blob.hash_mismatch) and leaves nothing behind.
	ByteLength int64
	// MaxBytes caps the streamed count; one byte more is blob.too_large,
	// judged while streaming, never after buffering the whole body
	// (0 or less: no cap).
	MaxBytes int64
	// CreatedAtMs is the upload time on the app clock.
	CreatedAtMs int64
}

// BlobStore keeps blob bytes. Every error a caller may show a client is a
// *syncerr.Error with a blob.* code; anything else is an internal failure.
type BlobStore interface {
	// Put streams r into the store and makes the blob visible only once
	// the content address of everything read equals u.BlobID (else
	// blob.hash_mismatch, and nothing stays behind). A blob already stored
	// under u.BlobID is kept as it is (the upload is idempotent): Put
	// returns its info with created false without requiring r to be read.
	// Concurrent Puts of one blob both succeed and store it once.
	Put(ctx context.Context, u BlobUpload, r io.Reader) (info BlobInfo, created bool, err error)
	// Stat returns a stored blob's info, or ok false.
	Stat(ctx context.Context, partition, blobID string) (info BlobInfo, ok bool, err error)
	// Open returns length bytes of the blob starting at offset (length -1
	// reads to the end); the caller closes the reader. An unknown blob is
	// blob.not_found. Offsets past the end are the caller's to refuse:
	// Open is called with a range inside info.ByteLength.
	Open(ctx context.Context, partition, blobID string, offset, length int64) (io.ReadCloser, BlobInfo, error)
	// ListCreatedBefore pages the partition's blobs created before
	// beforeMs, ordered by blob id, starting after the id after ("" starts
	// at the first), at most limit of them (the candidates of the blob
	// GC, the orphan sweep).
	ListCreatedBefore(ctx context.Context, partition string, beforeMs int64, after string, limit int) ([]BlobInfo, error)
	// Delete removes a blob; deleting an absent blob is not an error.
	Delete(ctx context.Context, partition, blobID string) error
}

// BlobPresigner is implemented by blob stores that mint their own direct
// URLs (S3 and compatible object stores). A store without it gets the
// host's native signed URLs when presigning is configured.
type BlobPresigner interface {
	// PresignGet returns a URL that downloads the blob until ttl passes.
	PresignGet(ctx context.Context, partition, blobID string, ttl time.Duration) (url string, err error)
	// PresignPut returns a URL that accepts one PUT of exactly the declared
	// length of u to the key of u.BlobID until ttl passes. The object store
	// does not recompute the content address (SPEC §5.9.3): integrity rests
	// on the push-time existence check and the client's verify on download.
	PresignPut(ctx context.Context, u BlobUpload, ttl time.Duration) (url string, err error)
}

// BlobBuffers is implemented by a BlobStore that can bound the memory its
// transfers hold, so the HTTP routes reserve it on the server's in-flight
// body budget before a transfer starts. A store without it is charged a
// conservative default.
type BlobBuffers interface {
	// PutBufferBytes bounds the memory a Put of u holds while its body
	// streams (u.ByteLength -1: a body of unknown length).
	PutBufferBytes(u BlobUpload) int64
	// OpenBufferBytes bounds the memory a reader of length bytes of info,
	// as Open returns it, holds until closed.
	OpenBufferBytes(info BlobInfo, length int64) int64
}

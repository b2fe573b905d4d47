// Package memblob is an in-memory blob store (SPEC §5.9.2) for tests, the
// conformance host's instances and single-process development servers.
// Blobs live in process memory and vanish with it, so it is no durable
// store: a production server keeps blobs in the database, on a file
// system or in an object store.
package memblob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Store is an in-memory ports.BlobStore. It is safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	blobs map[key]*blob
}

type key struct{ partition, id string }

type blob struct {
	info ports.BlobInfo
	data []byte // never modified once stored
}

var (
	_ ports.BlobStore   = (*Store)(nil)
	_ ports.BlobBuffers = (*Store)(nil)
)

// PutBufferBytes implements ports.BlobBuffers: a Put reads the whole body
// into memory before it is kept (the declared length, else up to the cap).
func (s *Store) PutBufferBytes(u ports.BlobUpload) int64 {
	if u.ByteLength >= 0 {
		return u.ByteLength
	}
	return max(u.MaxBytes, 0)
}

// OpenBufferBytes implements ports.BlobBuffers: a reader reads the kept
// bytes in place.
func (s *Store) OpenBufferBytes(ports.BlobInfo, int64) int64 { return 0 }

// New returns an empty store.
func New() *Store { return &Store{blobs: map[key]*blob{}} }

// Put implements ports.BlobStore. The body is hashed as it is read and
// counted against u.MaxBytes (0 or less: no cap); it becomes visible only
// once its content address equals u.BlobID.
func (s *Store) Put(ctx context.Context, u ports.BlobUpload, r io.Reader) (ports.BlobInfo, bool, error) {
	if !contentaddr.Valid(u.BlobID) {
		return ports.BlobInfo{}, false, syncerr.New(syncerr.BlobHashMismatch).WithMessage("blob id is not a content address")
	}
	if info, ok := s.stat(u.Partition, u.BlobID); ok {
		return info, false, nil
	}
	if u.MaxBytes > 0 && u.ByteLength > u.MaxBytes {
		return ports.BlobInfo{}, false, tooLarge(u.MaxBytes)
	}
	data, err := readVerified(ctx, u, r)
	if err != nil {
		return ports.BlobInfo{}, false, err
	}
	info := ports.BlobInfo{Partition: u.Partition, BlobID: u.BlobID, ByteLength: int64(len(data)), MediaType: u.MediaType, CreatedAtMs: u.CreatedAtMs}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{u.Partition, u.BlobID}
	if b, ok := s.blobs[k]; ok { // a concurrent Put stored it first
		return b.info, false, nil
	}
	s.blobs[k] = &blob{info: info, data: data}
	return info, true, nil
}

// readVerified reads r whole, hashing and counting as it goes: a body
// longer or shorter than the declared length, or of another content
// address, is blob.hash_mismatch; without a declared length, one byte past
// MaxBytes is blob.too_large. It never reads more than one byte past the
// declared length or the cap.
func readVerified(ctx context.Context, u ports.BlobUpload, r io.Reader) ([]byte, error) {
	h := contentaddr.NewHasher()
	var buf bytes.Buffer
	limit := int64(-1) // no bound
	switch {
	case u.ByteLength >= 0:
		limit = u.ByteLength // within the cap: Put checked it
	case u.MaxBytes > 0:
		limit = u.MaxBytes
	}
	switch {
	case u.ByteLength > 0 && u.MaxBytes > 0:
		// One buffer of the blob's size, no doubling copies.
		buf.Grow(int(u.ByteLength))
	case u.ByteLength > 0:
		buf.Grow(int(min(u.ByteLength, 1<<20))) // no cap: trust no declaration
	}
	src := io.Reader(ctxReader{ctx, r})
	if limit >= 0 {
		src = io.LimitReader(src, limit+1)
	}
	n, err := io.Copy(io.MultiWriter(&buf, h), src)
	if err != nil {
		return nil, err
	}
	switch {
	case u.ByteLength >= 0 && n != u.ByteLength:
		return nil, syncerr.New(syncerr.BlobHashMismatch).WithMessage(fmt.Sprintf("body is not the %d bytes declared", u.ByteLength))
	case limit >= 0 && n > limit:
		return nil, tooLarge(u.MaxBytes)
	case h.Sum() != u.BlobID:
		return nil, syncerr.New(syncerr.BlobHashMismatch).WithMessage("uploaded bytes do not hash to the blob id")
	}
	return buf.Bytes(), nil
}

func tooLarge(maxBytes int64) error {
	return syncerr.New(syncerr.BlobTooLarge).WithMessage(fmt.Sprintf("blob exceeds the %d-byte cap", maxBytes))
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (s *Store) stat(partition, id string) (ports.BlobInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.blobs[key{partition, id}]
	if !ok {
		return ports.BlobInfo{}, false
	}
	return b.info, true
}

// Stat implements ports.BlobStore.
func (s *Store) Stat(_ context.Context, partition, blobID string) (ports.BlobInfo, bool, error) {
	info, ok := s.stat(partition, blobID)
	return info, ok, nil
}

// Open implements ports.BlobStore.
func (s *Store) Open(_ context.Context, partition, blobID string, offset, length int64) (io.ReadCloser, ports.BlobInfo, error) {
	s.mu.RLock()
	b, ok := s.blobs[key{partition, blobID}]
	s.mu.RUnlock()
	if !ok {
		return nil, ports.BlobInfo{}, syncerr.New(syncerr.BlobNotFound)
	}
	size := int64(len(b.data))
	end := size
	if length >= 0 {
		end = offset + length
	}
	if offset < 0 || offset > size || end < offset || end > size {
		return nil, ports.BlobInfo{}, syncerr.Newf(syncerr.InternalError, "memblob: range %d+%d outside a %d-byte blob", offset, length, size)
	}
	return io.NopCloser(bytes.NewReader(b.data[offset:end])), b.info, nil
}

// ListCreatedBefore implements ports.BlobStore.
func (s *Store) ListCreatedBefore(_ context.Context, partition string, beforeMs int64, after string, limit int) ([]ports.BlobInfo, error) {
	if limit <= 0 {
		return nil, syncerr.Newf(syncerr.InternalError, "memblob: limit %d, want at least 1", limit)
	}
	s.mu.RLock()
	var out []ports.BlobInfo
	for k, b := range s.blobs {
		if k.partition == partition && k.id > after && b.info.CreatedAtMs < beforeMs {
			out = append(out, b.info)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].BlobID < out[j].BlobID })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Delete implements ports.BlobStore.
func (s *Store) Delete(_ context.Context, partition, blobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.blobs, key{partition, blobID})
	return nil
}

// Len reports the stored blobs of every partition.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.blobs)
}

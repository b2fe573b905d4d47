package testcontrol

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/syncd-dev/syncd/adapters/blobs/memblob"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// caps are the storage bounds of one instance, its equal part ("share")
// of Options.MaxBytes: half for its database, half for what it keeps in
// memory (blobs and segments).
type caps struct {
	// dbBytes caps the database: a SQLite file's size (a whole number of
	// pages, PRAGMA max_page_count), or what a PostgreSQL schema may grow
	// past its empty layout.
	dbBytes int64
	// memBytes caps the in-memory blob and segment bytes together.
	memBytes int64
}

func capsOf(share int64) caps {
	db := share / 2 / sqlitePageBytes * sqlitePageBytes
	return caps{dbBytes: db, memBytes: share - db}
}

// errFull is the refusal of a write past one of the instance's caps,
// with the catalog code code.
func errFull(what string, limit int64, code syncerr.Code) *syncerr.Error {
	return syncerr.Newf(code, "test instance %s full at %d bytes", what, limit).WithMessage(fmt.Sprintf(
		"the test instance's %s is full (cap %d bytes: its part of --test-control-max-bytes)", what, limit)).
		WithDetails(map[string]any{"maxBytes": limit})
}

// errStoreFull is the request-level refusal of a write past the
// database or memory cap: sync.invalid_request, answered with HTTP 507
// (Insufficient Storage) so a harness sees at once that the instance, not
// the server, is full.
func errStoreFull(what string, limit int64) error {
	return &httpapi.StatusError{Status: http.StatusInsufficientStorage, Err: errFull(what, limit, syncerr.InvalidRequest)}
}

// storeFull maps the engine's refusal of a write past the database cap
// (SQLite's "database full") to errStoreFull; other errors pass
// unchanged. The transaction that hit the cap has rolled back: nothing of
// it was stored.
func (in *instance) storeFull(err error) error {
	if err != nil && in.db.full(err) {
		return fmt.Errorf("%w (%v)", errStoreFull("database", in.caps.dbBytes), err)
	}
	return err
}

// memQuota counts the instance's in-memory bytes: the blobs it stores
// (counted here), the uploads under way (reserved at their start, up to
// their declared length or what is left) and the segments (read from the
// segment store). The check and the reservation are one step under mu,
// so concurrent writes cannot pass the cap together.
type memQuota struct {
	mu        sync.Mutex
	max       int64
	blobBytes int64
	reserved  int64
	segs      *memseg.Store
}

// used returns the bytes held and reserved; the caller holds q.mu.
func (q *memQuota) used(ctx context.Context) (int64, error) {
	st, err := q.segs.SegmentStats(ctx, 0) // the byte count does not depend on the time
	if err != nil {
		return 0, err
	}
	return q.blobBytes + q.reserved + st.Bytes, nil
}

// quotaBlobs is the instance's blob store with its uploads counted
// against the in-memory cap.
type quotaBlobs struct {
	*memblob.Store
	q *memQuota
}

var _ ports.BlobStore = quotaBlobs{}

// Put caps the streamed bytes at what the quota has left: past it the
// upload is blob.too_large, judged as it streams.
func (b quotaBlobs) Put(ctx context.Context, u ports.BlobUpload, r io.Reader) (ports.BlobInfo, bool, error) {
	if info, ok, err := b.Stat(ctx, u.Partition, u.BlobID); err != nil || ok {
		return info, false, err // idempotent: nothing new is stored
	}
	full := errFull("blob and segment store", b.q.max, syncerr.BlobTooLarge)
	b.q.mu.Lock()
	used, err := b.q.used(ctx)
	left := b.q.max - used
	switch {
	case err != nil:
		b.q.mu.Unlock()
		return ports.BlobInfo{}, false, err
	case left <= 0 || u.ByteLength > left:
		b.q.mu.Unlock()
		return ports.BlobInfo{}, false, full
	}
	capped := u.MaxBytes <= 0 || u.MaxBytes > left
	if capped {
		u.MaxBytes = left
	}
	hold := u.MaxBytes
	if u.ByteLength >= 0 {
		hold = u.ByteLength
	}
	b.q.reserved += hold
	b.q.mu.Unlock()

	info, created, err := b.Store.Put(ctx, u, r)
	b.q.mu.Lock()
	b.q.reserved -= hold
	if created {
		b.q.blobBytes += info.ByteLength
	}
	b.q.mu.Unlock()
	if capped && syncerr.CodeOf(err) == syncerr.BlobTooLarge {
		err = full // the quota's cap, not the blob size cap, was passed
	}
	return info, created, err
}

// Delete gives a deleted blob's bytes back.
func (b quotaBlobs) Delete(ctx context.Context, partition, blobID string) error {
	b.q.mu.Lock()
	defer b.q.mu.Unlock()
	info, ok, err := b.Stat(ctx, partition, blobID)
	if err != nil {
		return err
	}
	if err := b.Store.Delete(ctx, partition, blobID); err != nil {
		return err
	}
	if ok {
		b.q.blobBytes -= info.ByteLength
	}
	return nil
}

// quotaSegments is the instance's segment store with new segments counted
// against the in-memory cap.
type quotaSegments struct {
	*memseg.Store
	q   *memQuota
	now func() int64
}

var _ ports.SegmentStore = quotaSegments{}

// Put stores a new segment only within the cap. Nothing sweeps an
// instance's segments on a timer, so when the cap is reached the
// publications expired at virtual now are swept first; past the cap
// after that, the pull that built the segment fails.
func (s quotaSegments) Put(ctx context.Context, b []byte, p ports.SegmentPublication) (ports.SegmentPublication, error) {
	if rc, _, err := s.Open(ctx, p.SegmentID); err == nil {
		_ = rc.Close()
		return s.Store.Put(ctx, b, p) // stored already: a publication only
	}
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	now := s.now()
	used, err := s.q.used(ctx)
	if err != nil {
		return ports.SegmentPublication{}, err
	}
	if used+int64(len(b)) > s.q.max {
		if _, err := s.Sweep(ctx, now); err != nil {
			return ports.SegmentPublication{}, err
		}
		if used, err = s.q.used(ctx); err != nil {
			return ports.SegmentPublication{}, err
		}
		if used+int64(len(b)) > s.q.max {
			return ports.SegmentPublication{}, errStoreFull("blob and segment store", s.q.max)
		}
	}
	return s.Store.Put(ctx, b, p)
}

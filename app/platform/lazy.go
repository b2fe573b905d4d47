package platform

import (
	"context"
	"errors"
	"io"

	"github.com/syncd-dev/syncd/app/blobs"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/ports"
)

// The side stores on an SQL engine open (and create their tables) in a
// start hook, after the graph is built: each forwarder below stands in
// for its store in the graph and forwards to it once it is open.

// LazyBlobs forwards to a store opened in an OnStart hook.
type LazyBlobs struct {
	get func() ports.BlobStore
}

// NewLazyBlobs forwards to what get returns once the hook has run.
func NewLazyBlobs(get func() ports.BlobStore) *LazyBlobs { return &LazyBlobs{get: get} }

// LazySegments forwards to a store opened in an OnStart hook.
type LazySegments struct {
	get func() ports.SegmentStore
}

// NewLazySegments forwards to what get returns once the hook has run.
func NewLazySegments(get func() ports.SegmentStore) *LazySegments { return &LazySegments{get: get} }

// LazyLeases forwards to a store opened in an OnStart hook.
type LazyLeases struct{ s ports.LeaseStore }

// Set is the store opened; call it in the start hook.
func (l *LazyLeases) Set(s ports.LeaseStore) { l.s = s }

func (l *LazyBlobs) Put(ctx context.Context, u ports.BlobUpload, r io.Reader) (ports.BlobInfo, bool, error) {
	return l.get().Put(ctx, u, r)
}

func (l *LazyBlobs) Stat(ctx context.Context, partition, blobID string) (ports.BlobInfo, bool, error) {
	return l.get().Stat(ctx, partition, blobID)
}

func (l *LazyBlobs) Open(ctx context.Context, partition, blobID string, offset, length int64) (io.ReadCloser, ports.BlobInfo, error) {
	return l.get().Open(ctx, partition, blobID, offset, length)
}

func (l *LazyBlobs) ListCreatedBefore(ctx context.Context, partition string, beforeMs int64, after string, limit int) ([]ports.BlobInfo, error) {
	return l.get().ListCreatedBefore(ctx, partition, beforeMs, after, limit)
}

// PutBufferBytes and OpenBufferBytes forward to the opened store, with
// the use case's default for one that does not bound its transfers.
func (l *LazyBlobs) PutBufferBytes(u ports.BlobUpload) int64 {
	if b, ok := l.get().(ports.BlobBuffers); ok {
		return b.PutBufferBytes(u)
	}
	return blobs.DefaultTransferBufferBytes
}

func (l *LazyBlobs) OpenBufferBytes(info ports.BlobInfo, length int64) int64 {
	if b, ok := l.get().(ports.BlobBuffers); ok {
		return b.OpenBufferBytes(info, length)
	}
	return blobs.DefaultTransferBufferBytes
}

func (l *LazyBlobs) Delete(ctx context.Context, partition, blobID string) error {
	return l.get().Delete(ctx, partition, blobID)
}

func (l *LazySegments) s() ports.SegmentStore { return l.get() }

func (l *LazySegments) Put(ctx context.Context, b []byte, p ports.SegmentPublication) (ports.SegmentPublication, error) {
	return l.s().Put(ctx, b, p)
}

func (l *LazySegments) Find(ctx context.Context, k ports.SegmentKey, nowMs int64) (ports.SegmentPublication, bool, error) {
	return l.s().Find(ctx, k, nowMs)
}

func (l *LazySegments) Publications(ctx context.Context, id string) ([]ports.SegmentPublication, error) {
	return l.s().Publications(ctx, id)
}

func (l *LazySegments) Open(ctx context.Context, id string) (io.ReadCloser, int64, error) {
	return l.s().Open(ctx, id)
}

func (l *LazySegments) Sweep(ctx context.Context, beforeMs int64) (ports.SegmentSweep, error) {
	return l.s().Sweep(ctx, beforeMs)
}

// SegmentStats implements ports.SegmentStatsReader (the database store does).
func (l *LazySegments) SegmentStats(ctx context.Context, nowMs int64) (ports.SegmentStats, error) {
	sr, ok := l.s().(ports.SegmentStatsReader)
	if !ok {
		return ports.SegmentStats{}, errors.New("segment store reports no stats")
	}
	return sr.SegmentStats(ctx, nowMs)
}

func (l *LazyLeases) GetLease(ctx context.Context, partition, clientID string) (*lease.Stored, error) {
	return l.s.GetLease(ctx, partition, clientID)
}

func (l *LazyLeases) PutLease(ctx context.Context, prev *lease.Stored, next lease.Stored) (bool, error) {
	return l.s.PutLease(ctx, prev, next)
}

func (l *LazyLeases) RevokeLease(ctx context.Context, partition, leaseID string) (bool, error) {
	return l.s.RevokeLease(ctx, partition, leaseID)
}

func (l *LazyLeases) PruneLeases(ctx context.Context, q ports.LeasePrune) (ports.LeasePruneCounts, error) {
	return l.s.PruneLeases(ctx, q)
}

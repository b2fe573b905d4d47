package blobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/ports"
)

// GCStorage is what the blob GC (the orphan sweep) needs of the sync
// storage.
type GCStorage interface {
	ListPartitions(ctx context.Context) ([]ports.PartitionInfo, error)
	ports.PushStore
	ports.BlobClaimStore
}

// GCOptions configure a GC.
type GCOptions struct {
	Blobs   ports.BlobStore
	Storage GCStorage
	// OrphanGrace is how long an unreferenced blob is kept after its
	// upload (default DefaultOrphanGrace).
	OrphanGrace time.Duration
	// Page is the candidates one claim takes (default DefaultGCPage).
	Page    int
	Metrics Metrics
	// Events, when set, hears every partition's collection that claimed
	// a blob or failed (domain/event).
	Events ports.EventSink
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log hears the scheduled passes' deletions (default nowhere).
	Log *zap.Logger
}

// GC is the blob GC (the orphan sweep): it deletes orphan blobs. It is
// safe for concurrent use, also beside the blob GC of other processes
// over the same storage.
type GC struct{ o GCOptions }

// NewGC returns the blob GC.
func NewGC(o GCOptions) (*GC, error) {
	if o.Blobs == nil || o.Storage == nil {
		return nil, errors.New("blobs: GCOptions.Blobs and Storage are required")
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = DefaultOrphanGrace
	}
	if o.Page <= 0 {
		o.Page = DefaultGCPage
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &GC{o: o}, nil
}

// GCResult is one partition's collection.
type GCResult struct {
	Partition string
	// Claimed is how many blobs the collection found unreferenced past
	// the grace period (and claims an earlier one left); Deleted how many
	// of them it deleted.
	Claimed int
	Deleted int
}

// CollectPartition deletes the partition's orphans (SPEC §5.9.2): blobs no
// current row references, uploaded longer than the grace period ago.
//
// It pages through the store's blobs created before now − grace; for each
// page it takes the partition's push lock and claims, in that
// transaction, the blobs no row references (ports.PushTx.ClaimOrphanBlobs);
// then it deletes the claimed blobs and releases their claims. A push
// holds the same lock while it checks that the blobs it references exist
// and are not claimed, and records its references, so a push either
// records its reference before the claim (the blob is kept) or sees the
// claim (blob.not_found): a deleted blob is never referenced. Claims a
// stopped collection left are finished first.
//
// An upload of a blob between its claim and its deletion is answered as
// stored but the blob then goes: the push referencing it gets
// blob.not_found and the client uploads it again (SPEC §5.9.6 recovery).
func (g *GC) CollectPartition(ctx context.Context, partition string) (res GCResult, err error) {
	res = GCResult{Partition: partition}
	defer func() { g.o.Metrics.Collected(res) }()
	if g.o.Events != nil {
		began := g.o.Now()
		defer func() {
			if res.Claimed > 0 || err != nil {
				g.o.Events.Emit(event.BlobSwept{Partition: partition, Claimed: int64(res.Claimed), Deleted: int64(res.Deleted),
					Code: event.CodeOf(err), Duration: g.o.Now().Sub(began)})
			}
		}()
	}
	left, err := g.o.Storage.ListBlobClaims(ctx, partition)
	if err != nil {
		return res, fmt.Errorf("read blob claims: %w", err)
	}
	res.Claimed = len(left)
	if err := g.deleteClaimed(ctx, partition, left, &res); err != nil {
		return res, err
	}
	now := g.o.Now()
	cutoff := now.Add(-g.o.OrphanGrace).UnixMilli()
	after := ""
	for {
		page, err := g.o.Blobs.ListCreatedBefore(ctx, partition, cutoff, after, g.o.Page)
		if err != nil {
			return res, fmt.Errorf("list blobs: %w", err)
		}
		if len(page) == 0 {
			return res, nil
		}
		after = page[len(page)-1].BlobID
		ids := make([]string, len(page))
		for i, b := range page {
			ids[i] = b.BlobID
		}
		// Only the claim holds the lock (pushes of the partition wait for
		// it), not the deletions.
		var claimed []string
		err = g.o.Storage.Push(ctx, partition, ports.PushOptions{}, func(tx ports.PushTx) error {
			var err error
			claimed, err = tx.ClaimOrphanBlobs(ctx, ids, now.UnixMilli())
			return err
		})
		if err != nil {
			return res, fmt.Errorf("claim orphan blobs: %w", err)
		}
		res.Claimed += len(claimed)
		if err := g.deleteClaimed(ctx, partition, claimed, &res); err != nil {
			return res, err
		}
		if len(page) < g.o.Page {
			return res, nil
		}
	}
}

// deleteClaimed deletes claimed blobs and releases the claims of those it
// deleted; a failed deletion keeps its claim for the next collection.
func (g *GC) deleteClaimed(ctx context.Context, partition string, ids []string, res *GCResult) error {
	if len(ids) == 0 {
		return nil
	}
	var done []string
	var errs []error
	for _, id := range ids {
		if err := g.o.Blobs.Delete(ctx, partition, id); err != nil {
			errs = append(errs, fmt.Errorf("delete blob %s: %w", id, err))
			continue
		}
		done = append(done, id)
	}
	res.Deleted += len(done)
	if err := g.o.Storage.ReleaseBlobClaims(ctx, partition, done); err != nil {
		errs = append(errs, fmt.Errorf("release blob claims: %w", err))
	}
	return errors.Join(errs...)
}

// CollectAll collects every registered partition (the scheduled pass and
// "syncd blobs sweep"). Failures are joined; the other partitions are
// still collected.
func (g *GC) CollectAll(ctx context.Context) ([]GCResult, error) {
	var out []GCResult
	err := periodic.EachPartition(ctx, g.o.Storage, func(ctx context.Context, partition string) error {
		r, err := g.CollectPartition(ctx, partition)
		out = append(out, r)
		return err
	})
	return out, err
}

// Pass is the scheduled pass: CollectAll, its deletions logged and the pass
// counted (the scheduler logs a failure).
func (g *GC) Pass(ctx context.Context) error {
	res, err := g.CollectAll(ctx)
	if ctx.Err() != nil {
		return err
	}
	deleted := 0
	for _, r := range res {
		deleted += r.Deleted
	}
	if deleted > 0 {
		g.o.Log.Info("swept orphan blobs", zap.Int("partitions", len(res)), zap.Int("deleted", deleted))
	}
	g.o.Metrics.GCPassed(err != nil)
	return err
}

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

// SweepStorage is what the orphan sweep needs of the sync storage.
type SweepStorage interface {
	ListPartitions(ctx context.Context) ([]ports.PartitionInfo, error)
	ports.PushStore
	ports.BlobClaimStore
}

// SweepOptions configure a Sweeper.
type SweepOptions struct {
	Blobs   ports.BlobStore
	Storage SweepStorage
	// OrphanGrace is how long an unreferenced blob is kept after its
	// upload (default DefaultOrphanGrace).
	OrphanGrace time.Duration
	// Page is the candidates one claim takes (default DefaultSweepPage).
	Page    int
	Metrics Metrics
	// Events, when set, hears every partition's sweep that claimed a
	// blob or failed (domain/event).
	Events ports.EventSink
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log hears the scheduled passes' deletions (default nowhere).
	Log *zap.Logger
}

// Sweeper deletes orphan blobs. It is safe for concurrent use, also beside
// sweepers of other processes over the same storage.
type Sweeper struct{ o SweepOptions }

// NewSweeper returns the orphan sweep.
func NewSweeper(o SweepOptions) (*Sweeper, error) {
	if o.Blobs == nil || o.Storage == nil {
		return nil, errors.New("blobs: SweepOptions.Blobs and Storage are required")
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = DefaultOrphanGrace
	}
	if o.Page <= 0 {
		o.Page = DefaultSweepPage
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
	return &Sweeper{o: o}, nil
}

// SweepResult is one partition's orphan sweep.
type SweepResult struct {
	Partition string
	// Claimed is how many blobs the sweep found unreferenced past the
	// grace period (and claims an earlier sweep left); Deleted how many
	// of them it deleted.
	Claimed int
	Deleted int
}

// SweepPartition deletes the partition's orphans (SPEC §5.9.2): blobs no
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
// stopped sweep left are finished first.
//
// An upload of a blob between its claim and its deletion is answered as
// stored but the blob then goes: the push referencing it gets
// blob.not_found and the client uploads it again (SPEC §5.9.6 recovery).
func (s *Sweeper) SweepPartition(ctx context.Context, partition string) (res SweepResult, err error) {
	res = SweepResult{Partition: partition}
	defer func() { s.o.Metrics.Swept(res) }()
	if s.o.Events != nil {
		began := s.o.Now()
		defer func() {
			if res.Claimed > 0 || err != nil {
				s.o.Events.Emit(event.BlobSwept{Partition: partition, Claimed: int64(res.Claimed), Deleted: int64(res.Deleted),
					Code: event.CodeOf(err), Duration: s.o.Now().Sub(began)})
			}
		}()
	}
	left, err := s.o.Storage.ListBlobClaims(ctx, partition)
	if err != nil {
		return res, fmt.Errorf("read blob claims: %w", err)
	}
	res.Claimed = len(left)
	if err := s.deleteClaimed(ctx, partition, left, &res); err != nil {
		return res, err
	}
	now := s.o.Now()
	cutoff := now.Add(-s.o.OrphanGrace).UnixMilli()
	after := ""
	for {
		page, err := s.o.Blobs.ListCreatedBefore(ctx, partition, cutoff, after, s.o.Page)
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
		err = s.o.Storage.Push(ctx, partition, ports.PushOptions{}, func(tx ports.PushTx) error {
			var err error
			claimed, err = tx.ClaimOrphanBlobs(ctx, ids, now.UnixMilli())
			return err
		})
		if err != nil {
			return res, fmt.Errorf("claim orphan blobs: %w", err)
		}
		res.Claimed += len(claimed)
		if err := s.deleteClaimed(ctx, partition, claimed, &res); err != nil {
			return res, err
		}
		if len(page) < s.o.Page {
			return res, nil
		}
	}
}

// deleteClaimed deletes claimed blobs and releases the claims of those it
// deleted; a failed deletion keeps its claim for the next sweep.
func (s *Sweeper) deleteClaimed(ctx context.Context, partition string, ids []string, res *SweepResult) error {
	if len(ids) == 0 {
		return nil
	}
	var done []string
	var errs []error
	for _, id := range ids {
		if err := s.o.Blobs.Delete(ctx, partition, id); err != nil {
			errs = append(errs, fmt.Errorf("delete blob %s: %w", id, err))
			continue
		}
		done = append(done, id)
	}
	res.Deleted += len(done)
	if err := s.o.Storage.ReleaseBlobClaims(ctx, partition, done); err != nil {
		errs = append(errs, fmt.Errorf("release blob claims: %w", err))
	}
	return errors.Join(errs...)
}

// SweepAll sweeps every registered partition (the scheduled pass and
// "syncd blobs sweep"). Failures are joined; the other partitions are
// still swept.
func (s *Sweeper) SweepAll(ctx context.Context) ([]SweepResult, error) {
	var out []SweepResult
	err := periodic.EachPartition(ctx, s.o.Storage, func(ctx context.Context, partition string) error {
		r, err := s.SweepPartition(ctx, partition)
		out = append(out, r)
		return err
	})
	return out, err
}

// Pass is the scheduled pass: SweepAll, its deletions logged and the pass
// counted (the scheduler logs a failure).
func (s *Sweeper) Pass(ctx context.Context) error {
	res, err := s.SweepAll(ctx)
	if ctx.Err() != nil {
		return err
	}
	deleted := 0
	for _, r := range res {
		deleted += r.Deleted
	}
	if deleted > 0 {
		s.o.Log.Info("swept orphan blobs", zap.Int("partitions", len(res)), zap.Int("deleted", deleted))
	}
	s.o.Metrics.SweepPassed(err != nil)
	return err
}

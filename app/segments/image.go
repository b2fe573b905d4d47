package segments

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/ports"
)

// DefaultImageScanRows is how many rows one scan adds to an image being
// built (as large as the largest rows-lane page: keyset scans of a few
// thousand rows cost PostgreSQL far more per row).
const DefaultImageScanRows = 50_000

// ScopePin is the §4.7 pin of an image-lane bootstrap of table within
// filter: the newest commit whose change to the table carries a value of
// the filter's first scope variable (keys sorted), raised to the horizon
// and capped at maxSeq. No change the subscription would receive lies
// above it, so the snapshot there is the snapshot at maxSeq, and a stored
// image keeps its key across commits outside the scope.
func (s *Builder) ScopePin(ctx context.Context, partition, table string, filter map[string][]string, bounds ports.LogBounds) (int64, error) {
	vars := make([]string, 0, len(filter))
	for v := range filter {
		vars = append(vars, v)
	}
	if len(vars) == 0 {
		return bounds.MaxSeq, nil
	}
	sort.Strings(vars)
	seq, err := s.o.Store.LatestScopedChange(ctx, partition, ports.ScopedChangeQuery{
		Table: table, Variable: vars[0], Values: filter[vars[0]], ThroughSeq: bounds.MaxSeq,
	})
	if err != nil {
		return 0, fmt.Errorf("read scope pin: %w", err)
	}
	return min(max(seq, bounds.HorizonSeq), bounds.MaxSeq), nil
}

// ImageRequest asks for the whole-table sqlite image of one bootstrap
// (SPEC §5.3).
type ImageRequest struct {
	// Key is the image's publication key: media sqlite, pinned at the
	// scope pin, no row cursor or page size.
	Key   ports.SegmentKey
	Table *schema.Table
	// Project, when set, projects the stored rows onto Table, an older
	// schema version's (SPEC §9); Key then names that version.
	Project *schema.Projection
	Filter  map[string][]string
	// PageSize is the client's rows page (limitSnapshotRows): a snapshot
	// within one page is declined to the rows lane.
	PageSize int
}

// Image answers an ImageRequest.
type Image struct {
	// Found reports a stored image, found or built now, at Publication;
	// otherwise the rows lane serves the table.
	Found       bool
	Publication ports.SegmentPublication
	// FirstPage, when this request scanned the snapshot and declined it
	// for fitting one rows page, holds those rows: the rows lane's first
	// page needs no second scan.
	FirstPage []commit.Row
}

// Image returns the stored image of r.Key. A stored image is reused;
// otherwise one request per key in this process builds it while the
// others wait for it. It declines, leaving the table to the rows lane,
// without a segment store or builder, when the snapshot fits one rows
// page (the eligibility rule: inline rows pages already avoid the second
// round trip), and when a row holds a value no image cell holds exactly.
func (s *Builder) Image(ctx context.Context, r ImageRequest) (Image, error) {
	if s.o.Segments == nil {
		return Image{}, nil
	}
	for {
		pub, ok, err := s.o.Segments.Find(ctx, r.Key, s.o.Now().UnixMilli())
		if err != nil {
			return Image{}, fmt.Errorf("find image: %w", err)
		}
		if ok {
			s.o.Metrics.ImageReused()
			return Image{Found: true, Publication: pub}, nil
		}
		if s.o.Images == nil || s.declined.has(r.Key, r.PageSize, s.o.Now()) {
			return Image{}, nil
		}
		wait, leader := s.flight.join(r.Key)
		if !leader {
			select {
			case <-wait:
				continue // stored, or declined: look again
			case <-ctx.Done():
				return Image{}, ctx.Err()
			}
		}
		img, err := s.leadImage(ctx, r)
		s.flight.leave(r.Key)
		return img, err
	}
}

// leadImage builds and stores the image of r.Key unless another leader
// stored it since the lookup or the table is declined. The build runs
// detached from the request's cancellation: other requests wait for it.
func (s *Builder) leadImage(ctx context.Context, r ImageRequest) (Image, error) {
	key := r.Key
	if pub, ok, err := s.o.Segments.Find(ctx, key, s.o.Now().UnixMilli()); err != nil || ok {
		return Image{Found: ok, Publication: pub}, err
	}
	bctx := context.WithoutCancel(ctx)
	rows, err := s.o.Store.ScanRows(bctx, key.Partition, ports.RowScan{Table: key.Table, ScopeFilter: r.Filter, Limit: r.PageSize + 1})
	if err != nil {
		return Image{}, fmt.Errorf("scan rows: %w", err)
	}
	if len(rows) <= r.PageSize {
		s.declined.add(key, r.PageSize, s.o.Now().Add(s.o.SegmentTTL))
		s.o.Metrics.ImageDeclined("one_page")
		return Image{FirstPage: rows}, nil
	}
	start := s.o.Now()
	img, n, err := s.buildImage(bctx, r, rows)
	if errors.Is(err, sqliteimage.ErrUnrepresentable) {
		s.declined.add(key, declinedAlways, s.o.Now().Add(s.o.SegmentTTL))
		s.o.Metrics.ImageDeclined("unrepresentable")
		s.o.Log.Info("table served on the rows lane: a row has a value no sqlite image cell holds exactly",
			zap.String("table", key.Table), zap.Error(err))
		return Image{}, nil
	}
	var be *imageBuildError
	if errors.As(err, &be) {
		// The builder failed (scratch space, the engine): the rows lane
		// serves this bootstrap; the next one tries again.
		s.o.Metrics.ImageDeclined("build_failed")
		s.o.Log.Warn("sqlite image build failed; table served on the rows lane",
			zap.String("table", key.Table), zap.Error(err))
		return Image{}, nil
	}
	if err != nil {
		return Image{}, err
	}
	now := s.o.Now()
	pub, err := s.o.Segments.Put(bctx, img, ports.SegmentPublication{
		SegmentKey:  key,
		SegmentID:   contentaddr.Of(img),
		RowCount:    n,
		ByteLength:  int64(len(img)),
		CreatedAtMs: now.UnixMilli(),
		ExpiresAtMs: now.Add(s.o.SegmentTTL).UnixMilli(),
	})
	if err != nil {
		return Image{}, fmt.Errorf("store image: %w", err)
	}
	s.o.Metrics.ImageBuilt(n, len(img), s.o.Now().Sub(start))
	return Image{Found: true, Publication: pub}, nil
}

// buildImage writes the whole snapshot, starting with the rows already
// scanned, in row-id order. The next batch is scanned while the image
// writes the current one.
func (s *Builder) buildImage(ctx context.Context, r ImageRequest, rows []commit.Row) ([]byte, int64, error) {
	key := r.Key
	w, err := s.o.Images.NewImage(ctx, ports.ImageRequest{Table: r.Table, SchemaVersion: key.SchemaVersion, AsOfCommitSeq: key.AsOfCommitSeq, ScopeDigest: key.ScopeDigest})
	if err != nil {
		return nil, 0, &imageBuildError{fmt.Errorf("start image: %w", err)}
	}
	defer w.Abort()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan scanBatch, 1)
	go s.scanAfter(ctx, key.Partition, key.Table, r.Filter, rows[len(rows)-1].RowID, batches)
	var scratch []byte // a projected row; the image copies what it keeps
	for {
		for i := range rows {
			row := rows[i].Payload
			if r.Project != nil {
				if scratch, err = rowcodec.Project(scratch[:0], row, r.Project); err != nil {
					return nil, 0, fmt.Errorf("image row %s/%s: %w", key.Table, rows[i].RowID, err)
				}
				row = scratch
			}
			if err := w.Add(ctx, rows[i].Version, row); err != nil {
				err = fmt.Errorf("image row %s/%s: %w", key.Table, rows[i].RowID, err)
				if errors.Is(err, sqliteimage.ErrUnrepresentable) {
					return nil, 0, err
				}
				return nil, 0, &imageBuildError{err}
			}
		}
		b, more := <-batches
		if !more {
			break
		}
		if b.err != nil {
			return nil, 0, fmt.Errorf("scan rows: %w", b.err)
		}
		rows = b.rows
	}
	img, n, err := w.Finish(ctx)
	if err != nil {
		return nil, 0, &imageBuildError{fmt.Errorf("finish image: %w", err)}
	}
	return img, n, nil
}

// imageBuildError is a failure of the image builder itself, as opposed to
// reading the rows: the bootstrap falls back to the rows lane.
type imageBuildError struct{ err error }

func (e *imageBuildError) Error() string { return e.err.Error() }
func (e *imageBuildError) Unwrap() error { return e.err }

type scanBatch struct {
	rows []commit.Row
	err  error
}

// scanAfter sends the rows after the given row id in keyset batches until
// a short batch, an error or the context's end, then closes out.
func (s *Builder) scanAfter(ctx context.Context, partition, table string, filter map[string][]string, after string, out chan<- scanBatch) {
	defer close(out)
	for {
		rows, err := s.o.Store.ScanRows(ctx, partition, ports.RowScan{Table: table, ScopeFilter: filter, AfterRowID: after, Limit: s.o.ImageScanRows})
		if len(rows) > 0 || err != nil {
			select {
			case out <- scanBatch{rows, err}:
			case <-ctx.Done():
				return
			}
		}
		if err != nil || len(rows) < s.o.ImageScanRows {
			return
		}
		after = rows[len(rows)-1].RowID
	}
}

// declinedAlways marks a key declined whatever the page size.
const declinedAlways = -1

// declinedImages remembers image keys served on the rows lane: a snapshot
// within one page of a given size, or one an image cannot hold. A key
// names a pin, so the answer holds until the entry expires.
type declinedImages struct {
	mu sync.Mutex
	m  map[declinedKey]time.Time
}

type declinedKey struct {
	key      ports.SegmentKey
	pageSize int
}

// declinedMax bounds the entries; past it the map starts over.
const declinedMax = 4096

func (d *declinedImages) add(k ports.SegmentKey, pageSize int, until time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || len(d.m) >= declinedMax {
		d.m = map[declinedKey]time.Time{}
	}
	d.m[declinedKey{k, pageSize}] = until
}

func (d *declinedImages) has(k ports.SegmentKey, pageSize int, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ps := range []int{pageSize, declinedAlways} {
		dk := declinedKey{k, ps}
		if until, ok := d.m[dk]; ok {
			if now.Before(until) {
				return true
			}
			delete(d.m, dk)
		}
	}
	return false
}

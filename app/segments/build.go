package segments

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// SnapshotReader is what building reads from the sync storage: the
// snapshot's rows and, for an image's key, the scope pin.
type SnapshotReader interface {
	ScanRows(ctx context.Context, partition string, q ports.RowScan) ([]commit.Row, error)
	LatestScopedChange(ctx context.Context, partition string, q ports.ScopedChangeQuery) (int64, error)
}

// Publisher is the part of the segment store building uses: publish and
// find by publication key, and read stored bytes back to inline a reused
// small page.
type Publisher interface {
	ports.SegmentPublisher
	Open(ctx context.Context, id string) (rc io.ReadCloser, size int64, err error)
}

// BuildMetrics hears what a Builder did; the pull's counters implement it
// (syncd_pull_segment_*, syncd_pull_image_*).
type BuildMetrics interface {
	PageBuilt()
	PageReused()
	ImageBuilt(rows int64, bytes int, d time.Duration)
	ImageReused()
	// ImageDeclined names why the rows lane serves the table: one_page,
	// unrepresentable or build_failed.
	ImageDeclined(reason string)
}

// Defaults of BuildOptions.
const (
	DefaultInlineMaxBytes = 256 << 10
	DefaultSegmentTTL     = 24 * time.Hour
)

// BuildOptions configure a Builder.
type BuildOptions struct {
	Store SnapshotReader
	// Segments stores pages delivered as SEGMENT_REF and images; nil
	// builds inline pages only and no image.
	Segments Publisher
	// Images builds sqlite images (§5.3); nil builds none (stored images
	// are still found).
	Images ports.ImageBuilder
	// ImageScanRows is the keyset batch an image is built from (0 →
	// DefaultImageScanRows).
	ImageScanRows int
	// InlineMaxBytes is the §5.7 inline threshold (0 → 256 KiB; negative:
	// never inline a page a client can take as a SEGMENT_REF).
	InlineMaxBytes int
	// SegmentTTL is a publication's lifetime, and how long a declined
	// image key is remembered (0 → 24 h).
	SegmentTTL time.Duration
	// InlineCacheBytes bounds the in-process cache of built inline pages
	// (0 → 32 MiB; negative: no cache).
	InlineCacheBytes int64
	// Metrics hears builds, reuses and declines; nil hears nothing.
	Metrics BuildMetrics
	Now     func() time.Time
	Log     *zap.Logger
}

// Builder builds and publishes bootstrap segments: SSG2 rows pages
// (pages.go, SPEC §5.2) and whole-table SQLite images (image.go, §5.3).
// Each is built at most once per publication key in this process: a
// request that misses joins the key's flight, and the one leading it
// looks the key up again before building. It is safe for concurrent use.
type Builder struct {
	o        BuildOptions
	flight   flight
	cache    *pageCache
	declined declinedImages
}

// NewBuilder validates o and builds the Builder.
func NewBuilder(o BuildOptions) (*Builder, error) {
	if o.Store == nil {
		return nil, errors.New("segments: BuildOptions.Store is required")
	}
	if o.ImageScanRows <= 0 {
		o.ImageScanRows = DefaultImageScanRows
	}
	if o.InlineMaxBytes == 0 {
		o.InlineMaxBytes = DefaultInlineMaxBytes
	}
	if o.SegmentTTL <= 0 {
		o.SegmentTTL = DefaultSegmentTTL
	}
	if o.InlineCacheBytes == 0 {
		o.InlineCacheBytes = DefaultInlineCacheBytes
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
	return &Builder{o: o, flight: flight{calls: map[ports.SegmentKey]*flightCall{}}, cache: newPageCache(o.InlineCacheBytes)}, nil
}

type noMetrics struct{}

func (noMetrics) PageBuilt()                           {}
func (noMetrics) PageReused()                          {}
func (noMetrics) ImageBuilt(int64, int, time.Duration) {}
func (noMetrics) ImageReused()                         {}
func (noMetrics) ImageDeclined(string)                 {}

// flight lets one request build a segment while others with the same key
// wait.
type flight struct {
	mu    sync.Mutex
	calls map[ports.SegmentKey]*flightCall
}

type flightCall struct{ done chan struct{} }

func (f *flight) join(k ports.SegmentKey) (<-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.calls[k]; ok {
		return c.done, false
	}
	c := &flightCall{done: make(chan struct{})}
	f.calls[k] = c
	return c.done, true
}

func (f *flight) leave(k ports.SegmentKey) {
	f.mu.Lock()
	c := f.calls[k]
	delete(f.calls, k)
	f.mu.Unlock()
	if c != nil {
		close(c.done)
	}
}

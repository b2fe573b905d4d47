package segments

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// snapshot is one table's rows in row-id order, read as the storage
// reads them: keyset scans after a row id.
type snapshot struct {
	rows  []commit.Row
	pin   int64
	scans atomic.Int32
	// pinQuery is the last scope-pin query.
	pinQuery ports.ScopedChangeQuery
}

func (s *snapshot) ScanRows(_ context.Context, _ string, q ports.RowScan) ([]commit.Row, error) {
	s.scans.Add(1)
	i := sort.Search(len(s.rows), func(i int) bool { return s.rows[i].RowID > q.AfterRowID })
	return slices.Clone(s.rows[i:min(len(s.rows), i+q.Limit)]), nil
}

func (s *snapshot) LatestScopedChange(_ context.Context, _ string, q ports.ScopedChangeQuery) (int64, error) {
	s.pinQuery = q
	return s.pin, nil
}

// buildCounts records what a Builder reports.
type buildCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *buildCounts) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}

func (c *buildCounts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func (c *buildCounts) PageBuilt()                           { c.add("page built") }
func (c *buildCounts) PageReused()                          { c.add("page reused") }
func (c *buildCounts) ImageBuilt(int64, int, time.Duration) { c.add("image built") }
func (c *buildCounts) ImageReused()                         { c.add("image reused") }
func (c *buildCounts) ImageDeclined(reason string)          { c.add("declined " + reason) }

// buildEnv is a Builder over n project rows and an in-memory segment
// store.
type buildEnv struct {
	b    *Builder
	snap *snapshot
	segs *memseg.Store
	m    *buildCounts
	tbl  *schema.Table
}

func newBuildEnv(t *testing.T, n int, mut func(*BuildOptions)) *buildEnv {
	t.Helper()
	e := &buildEnv{snap: &snapshot{}, segs: memseg.New(), m: &buildCounts{}, tbl: ssptest.Schema(t).Table("projects")}
	for i := range n {
		id := fmt.Sprintf("p-%03d", i)
		e.snap.rows = append(e.snap.rows, commit.Row{RowID: id, Version: int64(i + 1), Payload: ssptest.Full(t, e.tbl, ssptest.Cols{
			"id": rowcodec.String(id), "owner": rowcodec.String("alice"), "name": rowcodec.String(id), "locked": rowcodec.Bool(false)})})
	}
	o := BuildOptions{Store: e.snap, Segments: e.segs, Metrics: e.m}
	if mut != nil {
		mut(&o)
	}
	var err error
	if e.b, err = NewBuilder(o); err != nil {
		t.Fatal(err)
	}
	return e
}

// key is a publication key of the projects table in media at pin.
func key(media ports.SegmentMediaType, pin int64) ports.SegmentKey {
	return ports.SegmentKey{Partition: "p1", LogEpoch: "e1", Table: "projects", SchemaVersion: 1, MediaType: media, ScopeDigest: "d", AsOfCommitSeq: pin}
}

func TestNewBuilderNeedsStore(t *testing.T) {
	if _, err := NewBuilder(BuildOptions{}); err == nil {
		t.Fatal("a builder without a store")
	}
}

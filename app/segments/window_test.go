package segments

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// windowBuild is a Builder over n tasks rows stored at version 3 of
// ssptest.Window, which serves version 2 too.
func windowBuild(t testing.TB, n int, mut func(*BuildOptions)) (*buildEnv, *schema.Window) {
	t.Helper()
	w := ssptest.Window(t)
	tbl := w.Current().Table("tasks")
	e := &buildEnv{snap: &snapshot{}, segs: memseg.New(), m: &buildCounts{}, tbl: tbl}
	for i := range n {
		id := fmt.Sprintf("t-%03d", i)
		e.snap.rows = append(e.snap.rows, commit.Row{RowID: id, Version: 1, Payload: ssptest.Full(t, tbl, ssptest.Cols{
			"id": rowcodec.String(id), "project_id": rowcodec.String("pr-1"), "title": rowcodec.String(id), "done": rowcodec.Bool(i%2 == 0),
			"estimate": rowcodec.Int(int64(i)), "attachment": rowcodec.Null(), "priority": rowcodec.Int(7)})})
	}
	o := BuildOptions{Store: e.snap, Segments: e.segs, Metrics: e.m}
	if mut != nil {
		mut(&o)
	}
	var err error
	if e.b, err = NewBuilder(o); err != nil {
		t.Fatal(err)
	}
	return e, w
}

// versionPage asks for the first page of the tasks table in version v's
// shape.
func versionPage(t *testing.T, e *buildEnv, w *schema.Window, v int32, inline bool) Page {
	t.Helper()
	p := w.View(v).Table("tasks")
	k := ports.SegmentKey{Partition: "p1", LogEpoch: "e1", Table: "tasks", SchemaVersion: v, MediaType: ports.SegmentRows,
		ScopeDigest: "d", AsOfCommitSeq: 7, PageSize: 10}
	pg := PageRequest{Key: k, Header: rowcodec.SegmentHeader{Table: "tasks", SchemaVersion: v, Columns: p.Table().Columns},
		Inline: inline, External: !inline}
	if !p.Identity() {
		pg.Project = p
	}
	var buf bytes.Buffer
	out, err := e.b.Page(context.Background(), &pg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if out.Ref {
		rc, _, err := e.segs.Open(context.Background(), out.Publication.SegmentID)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var b bytes.Buffer
		if _, err := b.ReadFrom(rc); err != nil {
			t.Fatal(err)
		}
		out.Bytes = b.Bytes()
	} else {
		out.Bytes = slices.Clone(out.Bytes)
	}
	return out
}

// Pages are built once per codec version and reused per version, from
// the inline cache and from the segment store alike; each carries its
// version and its version's columns.
func TestPagesPerCodecVersion(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("inline %t", inline), func(t *testing.T) {
			e, w := windowBuild(t, 3, nil)
			pages := map[int32][]byte{}
			for round := range 2 {
				for _, v := range []int32{3, 2} {
					pg := versionPage(t, e, w, v, inline)
					seg, err := rowcodec.DecodeSegment(pg.Bytes)
					if err != nil {
						t.Fatal(err)
					}
					cols := len(w.View(v).Table("tasks").Table().Columns)
					if seg.SchemaVersion != v || len(seg.Columns) != cols || len(seg.Blocks[0]) != 3 || len(seg.Blocks[0][0].Values) != cols {
						t.Fatalf("version %d page: version %d, %d columns", v, seg.SchemaVersion, len(seg.Columns))
					}
					if round == 1 && !bytes.Equal(pages[v], pg.Bytes) {
						t.Fatalf("version %d page differs when reused", v)
					}
					pages[v] = pg.Bytes
				}
			}
			if bytes.Equal(pages[2], pages[3]) || e.m.get("page built") != 2 || e.m.get("page reused") != 2 {
				t.Fatalf("builds %v", e.m.n)
			}
		})
	}
}

// An image is built once per codec version, from rows in that version's
// shape, and found again under its version's key.
func TestImagesPerCodecVersion(t *testing.T) {
	im := &images{}
	e, w := windowBuild(t, 5, withImages(im))
	for round := range 2 {
		for _, v := range []int32{3, 2} {
			p := w.View(v).Table("tasks")
			k := ports.SegmentKey{Partition: "p1", LogEpoch: "e1", Table: "tasks", SchemaVersion: v, MediaType: ports.SegmentSQLite, ScopeDigest: "d", AsOfCommitSeq: 7}
			r := ImageRequest{Key: k, Table: p.Table(), Filter: map[string][]string{"project_id": {"pr-1"}}, PageSize: 2}
			if !p.Identity() {
				r.Project = p
			}
			img, err := e.b.Image(context.Background(), r)
			if err != nil || !img.Found || img.Publication.SchemaVersion != v {
				t.Fatalf("version %d image %+v, %v", v, img, err)
			}
			if round == 0 {
				im.mu.Lock()
				req, added := im.req, slices.Clone(im.added)
				im.mu.Unlock()
				if req.SchemaVersion != v || req.Table != p.Table() || len(added) != 5 {
					t.Fatalf("version %d built from %+v (%d rows)", v, req, len(added))
				}
				if _, err := rowcodec.New(p.Table()).DecodeRow(added[0].Payload, nil); err != nil {
					t.Fatalf("version %d image row not in its shape: %v", v, err)
				}
			}
		}
	}
	if im.builds() != 2 || e.m.get("image built") != 2 || e.m.get("image reused") != 2 {
		t.Fatalf("builds %d, counts %v", im.builds(), e.m.n)
	}
}

// BenchmarkPagesTwoCodecs is a bootstrap storm through the inline page
// cache: clients at one schema version, or half of them at the older
// version of the window. Each page is built once per codec version, so
// the hit rate drops by one build per page and version, and the cache
// holds both shapes.
func BenchmarkPagesTwoCodecs(b *testing.B) {
	for _, versions := range [][]int32{{3}, {3, 2}} {
		b.Run(fmt.Sprintf("codecs=%d", len(versions)), func(b *testing.B) {
			var built, reused int
			for b.Loop() {
				e, w := windowBuild(b, 1000, nil)
				for client := range 100 {
					v := versions[client%len(versions)]
					p := w.View(v).Table("tasks")
					cursor := ""
					for {
						k := ports.SegmentKey{Partition: "p1", LogEpoch: "e1", Table: "tasks", SchemaVersion: v, MediaType: ports.SegmentRows,
							ScopeDigest: "d", AsOfCommitSeq: 7, PageSize: 100, RowCursor: cursor}
						pg := PageRequest{Key: k, Header: rowcodec.SegmentHeader{Table: "tasks", SchemaVersion: v, Columns: p.Table().Columns}, Inline: true}
						if !p.Identity() {
							pg.Project = p
						}
						var buf bytes.Buffer
						out, err := e.b.Page(context.Background(), &pg, &buf)
						if err != nil {
							b.Fatal(err)
						}
						if cursor = out.Next; cursor == "" {
							break
						}
					}
				}
				built, reused = e.m.get("page built"), e.m.get("page reused")
			}
			b.ReportMetric(100*float64(reused)/float64(built+reused), "hit%")
			b.ReportMetric(float64(built), "builds")
		})
	}
}

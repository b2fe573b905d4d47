package segments

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// page asks for the page of pageSize rows after cursor.
func (e *buildEnv) page(t *testing.T, pageSize int, cursor string, inline, external bool) Page {
	t.Helper()
	k := key(ports.SegmentRows, 7)
	k.PageSize, k.RowCursor = pageSize, cursor
	pg := PageRequest{Key: k, Header: rowcodec.SegmentHeader{Table: e.tbl.Name, SchemaVersion: 1, Columns: e.tbl.Columns}, Inline: inline, External: external}
	var buf bytes.Buffer
	out, err := e.b.Page(context.Background(), &pg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Ref {
		out.Bytes = slices.Clone(out.Bytes)
	}
	return out
}

// rowIDs decodes an SSG2 rows segment's row ids.
func (e *buildEnv) rowIDs(t *testing.T, b []byte) []string {
	t.Helper()
	seg, err := rowcodec.DecodeSegment(b)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range slices.Concat(seg.Blocks...) {
		id, _ := rowcodec.ScopeString(r.Values[e.tbl.PKIndex])
		ids = append(ids, id)
	}
	return ids
}

// §5.2, §5.7: a page is keyset by row id; small pages are inlined and
// cached, large ones (or any for a client taking only references) stored
// and referenced; a stored page small enough is read back to inline.
func TestPageDelivery(t *testing.T) {
	e := newBuildEnv(t, 5, func(o *BuildOptions) { o.InlineMaxBytes = 200 })
	first := e.page(t, 2, "", true, true)
	if first.Ref || first.Next != "p-001" || !slices.Equal(e.rowIDs(t, first.Bytes), []string{"p-000", "p-001"}) {
		t.Fatalf("first page: %+v", first)
	}
	if again := e.page(t, 2, "", true, true); !bytes.Equal(again.Bytes, first.Bytes) || e.m.get("page built") != 1 || e.m.get("page reused") != 1 {
		t.Fatalf("not reused from the cache: %v", e.m.n)
	}
	last := e.page(t, 2, "p-003", true, true)
	if last.Next != "" || !slices.Equal(e.rowIDs(t, last.Bytes), []string{"p-004"}) {
		t.Fatalf("last page: %+v", last)
	}
	big := e.page(t, 5, "", true, true)
	if !big.Ref || big.Publication.RowCount != 5 || big.Publication.ByteLength <= 200 || big.Next != "" {
		t.Fatalf("large page: %+v", big)
	}
	ref := e.page(t, 1, "", false, true)
	if !ref.Ref || ref.Next != "p-000" {
		t.Fatalf("references only: %+v", ref)
	}
	inlined := e.page(t, 1, "", true, true)
	if inlined.Ref || inlined.Next != "p-000" || int64(len(inlined.Bytes)) != ref.Publication.ByteLength || e.m.get("page reused") != 2 {
		t.Fatalf("stored page not read back: %+v", inlined)
	}
	if again := e.page(t, 5, "", true, false); again.Ref || !slices.Equal(e.rowIDs(t, again.Bytes), []string{"p-000", "p-001", "p-002", "p-003", "p-004"}) {
		t.Fatalf("inline only: %+v", again)
	}
}

// Without a segment store a client taking only references cannot be
// served.
func TestPageNeedsAStoreForReferences(t *testing.T) {
	e := newBuildEnv(t, 1, func(o *BuildOptions) { o.Segments = nil })
	k := key(ports.SegmentRows, 7)
	k.PageSize = 1
	_, err := e.b.Page(context.Background(), &PageRequest{Key: k, External: true}, &bytes.Buffer{})
	wantCode(t, err, syncerr.InternalError)
}

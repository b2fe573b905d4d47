package rowcodec_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// pushTable is the 9-column table of the push vectors (one column of every
// type, primary key id).
func pushTable() *rowcodec.Codec {
	return rowcodec.NewColumns([]schema.Column{
		{Name: "id", Type: schema.TypeString},
		{Name: "title", Type: schema.TypeString, Nullable: true},
		{Name: "body", Type: schema.TypeString},
		{Name: "count", Type: schema.TypeInteger, Nullable: true},
		{Name: "score", Type: schema.TypeFloat},
		{Name: "done", Type: schema.TypeBoolean},
		{Name: "meta", Type: schema.TypeJSON, Nullable: true},
		{Name: "blob", Type: schema.TypeBytes, Nullable: true},
		{Name: "doc", Type: schema.TypeCRDT, Nullable: true},
	}, 0)
}

// rowSeeds returns full rows found in the vectors: COMMIT rows and
// conflict serverRows of the response vectors (the 8-column notes table).
func rowSeeds() [][]byte {
	var out [][]byte
	for _, b := range vectortest.Files("response") {
		m, err := ssp2.Decode(b)
		if err != nil {
			continue
		}
		for _, f := range m.Frames {
			switch x := f.(type) {
			case *ssp2.Commit:
				for _, c := range x.Changes {
					out = append(out, c.Row)
				}
			case *ssp2.PushResult:
				for _, r := range x.Results {
					out = append(out, r.ServerRow)
				}
			}
		}
	}
	return out
}

func notesTable() *rowcodec.Codec {
	return rowcodec.NewColumns([]schema.Column{
		{Name: "id", Type: schema.TypeString},
		{Name: "title", Type: schema.TypeString, Nullable: true},
		{Name: "body", Type: schema.TypeString},
		{Name: "count", Type: schema.TypeInteger, Nullable: true},
		{Name: "score", Type: schema.TypeFloat},
		{Name: "done", Type: schema.TypeBoolean},
		{Name: "meta", Type: schema.TypeJSON, Nullable: true},
		{Name: "blob", Type: schema.TypeBytes, Nullable: true},
	}, 0)
}

func checkCode(t *testing.T, err error) {
	if c := syncerr.CodeOf(err); c != syncerr.InvalidRequest {
		t.Fatalf("unexpected code %q: %v", c, err)
	}
}

// FuzzDecodeRow: full rows of the notes table and of a table with every
// type (incl. blob_ref and crdt) decode, validate and re-encode
// identically, or fail with sync.invalid_request.
func FuzzDecodeRow(f *testing.F) {
	for _, b := range rowSeeds() {
		f.Add(b, false)
	}
	all := rowcodec.NewColumns(allTypes(), 0)
	enc, _ := all.AppendRow(nil, sampleRow())
	f.Add(enc, true)
	notes := notesTable()
	f.Fuzz(func(t *testing.T, in []byte, allTypesTable bool) {
		c := notes
		if allTypesTable {
			c = all
		}
		vals, err := c.DecodeRow(in, nil)
		if verr := c.ValidateRow(in); (verr == nil) != (err == nil) {
			t.Fatalf("ValidateRow and DecodeRow disagree: %v vs %v", verr, err)
		}
		if err != nil {
			checkCode(t, err)
			return
		}
		out, err := c.AppendRow(nil, vals)
		if err != nil {
			t.Fatalf("decoded row does not re-encode: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", out, in)
		}
		_ = canonjson.Marshal(rowcodec.RenderRowValues(c.Columns(), vals), "")
	})
}

// FuzzDecodeSparse: sparse push payloads of the push-vector table.
func FuzzDecodeSparse(f *testing.F) {
	for _, b := range vectortest.Files("push") {
		f.Add(b)
	}
	c := pushTable()
	f.Fuzz(func(t *testing.T, in []byte) {
		vals, err := c.DecodeSparse(in, nil)
		if err != nil {
			checkCode(t, err)
			return
		}
		out, err := c.AppendSparse(nil, vals)
		if err != nil {
			t.Fatalf("decoded row does not re-encode: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", out, in)
		}
		_ = canonjson.Marshal(rowcodec.RenderSparse(c.Columns(), vals), "")
	})
}

// FuzzDecodeSegment: SSG2 segments decode (or fail with
// sync.invalid_request), ValidateSegment agrees, and what decodes
// re-encodes to the same bytes.
func FuzzDecodeSegment(f *testing.F) {
	for _, b := range vectortest.Files("segment") {
		f.Add(b)
	}
	for _, b := range vectortest.Files("response") {
		if m, err := ssp2.Decode(b); err == nil {
			for _, fr := range m.Frames {
				if s, ok := fr.(*ssp2.SegmentInline); ok {
					f.Add(s.Payload)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		seg, err := rowcodec.DecodeSegment(in)
		if verr := rowcodec.ValidateSegment(in); (verr == nil) != (err == nil) {
			t.Fatalf("ValidateSegment and DecodeSegment disagree: %v vs %v", verr, err)
		}
		sr, serr := rowcodec.NewSegmentStreamReader(bytes.NewReader(in), 1<<20)
		if serr == nil {
			for {
				if _, serr = sr.NextBlock(); serr != nil {
					break
				}
			}
			if serr == io.EOF {
				serr = nil
			}
		}
		if (serr == nil) != (err == nil) {
			t.Fatalf("SegmentStreamReader and DecodeSegment disagree: %v vs %v", serr, err)
		}
		if err != nil {
			checkCode(t, err)
			return
		}
		out, err := rowcodec.EncodeSegment(seg)
		if err != nil {
			t.Fatalf("decoded segment does not re-encode: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", out, in)
		}
		_ = canonjson.Marshal(rowcodec.RenderSegment(seg), "")
	})
}

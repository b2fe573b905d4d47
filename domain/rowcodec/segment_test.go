package rowcodec_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

func notesHeader() rowcodec.SegmentHeader {
	return rowcodec.SegmentHeader{Table: "notes", SchemaVersion: 3, Columns: []schema.Column{
		{Name: "id", Type: schema.TypeString},
		{Name: "body", Type: schema.TypeString, Nullable: true},
		{Name: "count", Type: schema.TypeInteger},
	}}
}

func TestSegmentWriterCutsBlocksAtTargets(t *testing.T) {
	cases := []struct {
		name       string
		rows       int
		blockRows  int
		blockBytes int
		wantBlocks []int
	}{
		{"rows-target", 2500, 1000, 1 << 20, []int{1000, 1000, 500}},
		{"bytes-target", 10, 1000, 100, []int{4, 4, 2}},
		{"empty", 0, 1000, 1 << 20, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := notesHeader()
			w, err := rowcodec.NewSegmentWriter(&buf, h)
			if err != nil {
				t.Fatal(err)
			}
			w.BlockRows, w.BlockBytes = tc.blockRows, tc.blockBytes
			c := rowcodec.NewColumns(h.Columns, 0)
			for i := range tc.rows {
				vals := []rowcodec.Value{rowcodec.String(fmt.Sprintf("n-%04d", i)), rowcodec.Null(), rowcodec.Int(int64(i))}
				if i%2 == 0 {
					if err := w.WriteRow(int64(i+1), vals); err != nil {
						t.Fatal(err)
					}
					continue
				}
				enc, _ := c.AppendRow(nil, vals)
				if err := w.WriteEncodedRow(int64(i+1), enc); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if w.BytesWritten() != int64(buf.Len()) || w.RowCount() != int64(tc.rows) {
				t.Fatalf("counters: %d bytes / %d rows", w.BytesWritten(), w.RowCount())
			}
			sr, err := rowcodec.NewSegmentReader(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			n := 0
			for {
				rows, err := sr.NextBlock()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					n++
					if r.ServerVersion != int64(n) || r.Values[2].Int() != int64(n-1) {
						t.Fatalf("row %d decoded wrong", n)
					}
				}
				got = append(got, len(rows))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantBlocks) {
				t.Fatalf("blocks %v, want %v", got, tc.wantBlocks)
			}
		})
	}
}

func TestSegmentWriterRejectsBadRows(t *testing.T) {
	w, _ := rowcodec.NewSegmentWriter(io.Discard, notesHeader())
	if err := w.WriteRow(0, []rowcodec.Value{rowcodec.String("a"), rowcodec.Null(), rowcodec.Int(1)}); err == nil {
		t.Fatal("serverVersion 0 accepted")
	}
	if err := w.WriteEncodedRow(1, []byte{0x01}); err == nil {
		t.Fatal("invalid encoded row accepted")
	}
	if err := w.WriteRow(1, []rowcodec.Value{rowcodec.Null(), rowcodec.Null(), rowcodec.Int(1)}); err == nil {
		t.Fatal("null primary key accepted")
	}
}

func TestSegmentCheckTableReportsSchemaMismatch(t *testing.T) {
	h := notesHeader()
	table := &schema.Table{Name: "notes", Columns: append([]schema.Column(nil), h.Columns...)}
	if err := h.CheckTable(table); err != nil {
		t.Fatal(err)
	}
	table.Columns[1].Nullable = false
	if syncerr.CodeOf(h.CheckTable(table)) != syncerr.SchemaMismatch {
		t.Fatal("nullability difference not reported as sync.schema_mismatch")
	}
	table.Columns = table.Columns[:2]
	if syncerr.CodeOf(h.CheckTable(table)) != syncerr.SchemaMismatch {
		t.Fatal("column count difference not reported")
	}
}

func TestSegmentDecodeRejectsStructuralViolations(t *testing.T) {
	var buf bytes.Buffer
	w, _ := rowcodec.NewSegmentWriter(&buf, notesHeader())
	_ = w.WriteRow(1, []rowcodec.Value{rowcodec.String("a"), rowcodec.Null(), rowcodec.Int(1)})
	_ = w.Close()
	good := buf.Bytes()
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string][]byte{
		"bad-magic":            mut(func(b []byte) []byte { b[3] = '3'; return b }),
		"format-version-2":     mut(func(b []byte) []byte { b[4] = 2; return b }),
		"nonzero-flags":        mut(func(b []byte) []byte { b[6] = 1; return b }),
		"trailing-after-end":   append(append([]byte(nil), good...), 0),
		"missing-end-marker":   good[:len(good)-4],
		"huge-row-count":       mut(func(b []byte) []byte { copy(b[len(b)-4-27-8:], []byte{0xff, 0xff, 0xff, 0x0f}); return b }),
		"column-flag-reserved": mut(func(b []byte) []byte { b[8+4+5+4+2+4+2+1] = 2; return b }),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := rowcodec.DecodeSegment(in); syncerr.CodeOf(err) != syncerr.InvalidRequest {
				t.Fatalf("decode: want sync.invalid_request, got %v", err)
			}
			if syncerr.CodeOf(rowcodec.ValidateSegment(in)) != syncerr.InvalidRequest {
				t.Fatal("validate accepted it")
			}
		})
	}
}

type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

func readAllBlocks(r *rowcodec.SegmentStreamReader) (int, error) {
	n := 0
	for {
		rows, err := r.NextBlock()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += len(rows)
	}
}

// TestSegmentStreamReaderAgreesWithDecodeSegment: the io.Reader decoder
// accepts and rejects exactly what the in-memory decoder does.
func TestSegmentStreamReaderAgreesWithDecodeSegment(t *testing.T) {
	var buf bytes.Buffer
	w, _ := rowcodec.NewSegmentWriter(&buf, notesHeader())
	w.BlockRows = 7
	for i := range 20 {
		_ = w.WriteRow(int64(i+1), []rowcodec.Value{rowcodec.String(fmt.Sprint(i)), rowcodec.Null(), rowcodec.Int(int64(i))})
	}
	_ = w.Close()
	good := buf.Bytes()
	inputs := map[string][]byte{"generated": good, "trailing": append(append([]byte(nil), good...), 1), "truncated": good[:len(good)-3]}
	for i := 0; i < len(good); i += 5 {
		inputs[fmt.Sprintf("cut-%d", i)] = good[:i]
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			seg, derr := rowcodec.DecodeSegment(in)
			sr, err := rowcodec.NewSegmentStreamReader(oneByte{bytes.NewReader(in)}, 0)
			n := 0
			if err == nil {
				sr.Reuse = true
				n, err = readAllBlocks(sr)
			}
			if (err == nil) != (derr == nil) {
				t.Fatalf("stream %v, memory %v", err, derr)
			}
			if err != nil {
				if syncerr.CodeOf(err) != syncerr.InvalidRequest {
					t.Fatalf("code: %v", err)
				}
				return
			}
			total := 0
			for _, b := range seg.Blocks {
				total += len(b)
			}
			if n != total {
				t.Fatalf("%d rows, want %d", n, total)
			}
		})
	}
	sr, err := rowcodec.NewSegmentStreamReader(bytes.NewReader(good), 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAllBlocks(sr); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("block limit not enforced: %v", err)
	}
}

package rowcodec_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
)

// benchColumns is the 8-column notes table of the vectors.
func benchColumns() []schema.Column { return notesTable().Columns() }

func benchRow(i int) []rowcodec.Value {
	var title rowcodec.Value = rowcodec.String(fmt.Sprintf("Note number %d — déjà vu", i))
	if i%7 == 0 {
		title = rowcodec.Null()
	}
	return []rowcodec.Value{
		rowcodec.String(fmt.Sprintf("n-%06d", i)),
		title,
		rowcodec.String("The quick brown fox jumps over the lazy dog, again and again."),
		rowcodec.Int(int64(i * 3)),
		rowcodec.Float(float64(i) / 8),
		rowcodec.Bool(i%2 == 0),
		rowcodec.JSON(fmt.Sprintf(`{"tags":["a","b"],"n":%d,"ok":true}`, i)),
		rowcodec.Bytes([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}),
	}
}

func buildSegment(b testing.TB, rows int) []byte {
	var buf bytes.Buffer
	w, err := rowcodec.NewSegmentWriter(&buf, rowcodec.SegmentHeader{Table: "notes", SchemaVersion: 1, Columns: benchColumns()})
	if err != nil {
		b.Fatal(err)
	}
	for i := range rows {
		if err := w.WriteRow(int64(i+1), benchRow(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkSegmentDecode10k decodes a 10,000-row segment block by block,
// materializing every value (reusing block buffers).
func BenchmarkSegmentDecode10k(b *testing.B) {
	seg := buildSegment(b, 10000)
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for b.Loop() {
		sr, err := rowcodec.NewSegmentReader(seg)
		if err != nil {
			b.Fatal(err)
		}
		sr.Reuse = true
		n := 0
		for {
			rows, err := sr.NextBlock()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(rows)
		}
		if n != 10000 {
			b.Fatalf("%d rows", n)
		}
	}
}

// BenchmarkSegmentValidate10k checks a 10,000-row segment structurally (the
// SEGMENT_INLINE decode check).
func BenchmarkSegmentValidate10k(b *testing.B) {
	seg := buildSegment(b, 10000)
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := rowcodec.ValidateSegment(seg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSegmentEncode10k encodes a 10,000-row segment from values.
func BenchmarkSegmentEncode10k(b *testing.B) {
	rows := make([][]rowcodec.Value, 10000)
	for i := range rows {
		rows[i] = benchRow(i)
	}
	h := rowcodec.SegmentHeader{Table: "notes", SchemaVersion: 1, Columns: benchColumns()}
	var buf bytes.Buffer
	size := len(buildSegment(b, 10000))
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		w, err := rowcodec.NewSegmentWriter(&buf, h)
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range rows {
			if err := w.WriteRow(int64(i+1), r); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSegmentEncodeStoredRows10k builds a 10,000-row segment from
// stored full-row payloads (the server's bootstrap path).
func BenchmarkSegmentEncodeStoredRows10k(b *testing.B) {
	c := notesTable()
	payloads := make([][]byte, 10000)
	for i := range payloads {
		payloads[i], _ = c.AppendRow(nil, benchRow(i))
	}
	h := rowcodec.SegmentHeader{Table: "notes", SchemaVersion: 1, Columns: benchColumns()}
	var buf bytes.Buffer
	b.SetBytes(int64(len(buildSegment(b, 10000))))
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		w, _ := rowcodec.NewSegmentWriter(&buf, h)
		for i, p := range payloads {
			if err := w.WriteEncodedRow(int64(i+1), p); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRowDecode decodes one full row into a reused value slice.
func BenchmarkRowDecode(b *testing.B) {
	c := notesTable()
	enc, _ := c.AppendRow(nil, benchRow(1))
	dst := make([]rowcodec.Value, 8)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = c.DecodeRow(enc, dst); err != nil {
			b.Fatal(err)
		}
	}
}

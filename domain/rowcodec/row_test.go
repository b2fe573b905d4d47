package rowcodec_test

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

const blobID = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func allTypes() []schema.Column {
	return []schema.Column{
		{Name: "id", Type: schema.TypeString},
		{Name: "n", Type: schema.TypeInteger, Nullable: true},
		{Name: "f", Type: schema.TypeFloat},
		{Name: "b", Type: schema.TypeBoolean},
		{Name: "j", Type: schema.TypeJSON, Nullable: true},
		{Name: "raw", Type: schema.TypeBytes, Nullable: true},
		{Name: "ref", Type: schema.TypeBlobRef, Nullable: true},
		{Name: "doc", Type: schema.TypeCRDT, Nullable: true},
		{Name: "tail", Type: schema.TypeString, Nullable: true},
	}
}

func sampleRow() []rowcodec.Value {
	return []rowcodec.Value{
		rowcodec.String("n-1 𝄞"), rowcodec.Int(-9007199254740991), rowcodec.Float(math.NaN()), rowcodec.Bool(true),
		rowcodec.JSON(`{"a": [1, 2]}`), rowcodec.Bytes([]byte{0, 1, 2}),
		rowcodec.BlobRef(`{"blobId":"` + blobID + `","byteLength":12,"mediaType":"image/png"}`),
		rowcodec.CRDT(nil), rowcodec.Null(),
	}
}

func TestFullRowRoundTripsEveryColumnType(t *testing.T) {
	c := rowcodec.NewColumns(allTypes(), 0)
	enc, err := c.AppendRow(nil, sampleRow())
	if err != nil {
		t.Fatal(err)
	}
	vals, err := c.DecodeRow(enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	re, err := c.AppendRow(nil, vals)
	if err != nil || !bytes.Equal(re, enc) {
		t.Fatalf("re-encode mismatch: %v", err)
	}
	if vals[0].Text() != "n-1 𝄞" || vals[1].Int() != -9007199254740991 || !math.IsNaN(vals[2].Float()) || !vals[8].IsNull() {
		t.Fatalf("decoded values wrong: %+v", vals)
	}
	if err := c.ValidateRow(enc); err != nil {
		t.Fatal(err)
	}
}

func TestSparseRowRoundTripsPartialRow(t *testing.T) {
	c := rowcodec.NewColumns(allTypes(), 0)
	in := make([]rowcodec.Value, 9)
	in[0] = rowcodec.String("k")
	in[4] = rowcodec.Null()
	in[8] = rowcodec.String("t")
	enc, err := c.AppendSparse(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	// presence: bits 0,4 (byte 0 = 0x11), bit 8 (byte 1 = 0x01); nulls over 3 present: bit 1.
	if !bytes.HasPrefix(enc, []byte{0x11, 0x01, 0x02}) {
		t.Fatalf("bitmaps % x", enc[:3])
	}
	out, err := c.DecodeSparse(enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if !in[i].Equal(out[i]) && !(in[i].Kind() == out[i].Kind() && bytes.Equal(in[i].Raw(), out[i].Raw())) {
			t.Fatalf("column %d: %v != %v", i, in[i], out[i])
		}
	}
}

func TestRowDecodeRejectsSpecViolations(t *testing.T) {
	c := rowcodec.NewColumns(allTypes(), 0)
	good, _ := c.AppendRow(nil, sampleRow())
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	one := rowcodec.NewColumns([]schema.Column{{Name: "v", Type: schema.TypeString}}, 0)
	jsonCol := rowcodec.NewColumns([]schema.Column{{Name: "v", Type: schema.TypeJSON}}, 0)
	intCol := rowcodec.NewColumns([]schema.Column{{Name: "v", Type: schema.TypeInteger}}, 0)
	refCol := rowcodec.NewColumns([]schema.Column{{Name: "v", Type: schema.TypeBlobRef}}, 0)
	boolCol := rowcodec.NewColumns([]schema.Column{{Name: "v", Type: schema.TypeBoolean}}, 0)
	str := func(s string) []byte {
		b := []byte{0, byte(len(s)), 0, 0, 0}
		return append(b, s...)
	}
	cases := []struct {
		name  string
		codec *rowcodec.Codec
		in    []byte
	}{
		{"padding-bit", c, mutate(func(b []byte) []byte { b[1] |= 0x80; return b })},
		{"null-bit-on-non-nullable", c, mutate(func(b []byte) []byte { b[0] |= 0x01; return b })},
		{"trailing-byte", c, append(append([]byte(nil), good...), 0)},
		{"truncated", c, good[:len(good)-1]},
		{"invalid-utf8", one, str("\xff")},
		{"non-json", jsonCol, str("{nope")},
		{"json-trailing-garbage", jsonCol, str("1 2")},
		{"i64-out-of-range", intCol, []byte{0, 0, 0, 0, 0, 0, 0, 0x20, 0}},
		{"bool-byte-2", boolCol, []byte{0, 2}},
		{"blob-ref-unknown-key", refCol, str(`{"blobId":"` + blobID + `","byteLength":1,"x":1}`)},
		{"blob-ref-key-order", refCol, str(`{"byteLength":1,"blobId":"` + blobID + `"}`)},
		{"blob-ref-bad-id", refCol, str(`{"blobId":"sha256:ABC","byteLength":1}`)},
		{"blob-ref-negative-length", refCol, str(`{"blobId":"` + blobID + `","byteLength":-1}`)},
		{"blob-ref-fractional-length", refCol, str(`{"blobId":"` + blobID + `","byteLength":1.5}`)},
		{"blob-ref-not-object", refCol, str(`[]`)},
		{"length-prefix-past-end", one, []byte{0, 0xff, 0xff, 0xff, 0x7f, 'a'}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.codec.DecodeRow(tc.in, nil)
			if syncerr.CodeOf(err) != syncerr.InvalidRequest {
				t.Fatalf("want sync.invalid_request, got %v", err)
			}
			if syncerr.CodeOf(tc.codec.ValidateRow(tc.in)) != syncerr.InvalidRequest {
				t.Fatalf("ValidateRow accepted it")
			}
		})
	}
}

func TestBlobRefAcceptsCanonicalShapes(t *testing.T) {
	for _, s := range []string{
		`{"blobId":"` + blobID + `","byteLength":0}`,
		`{"blobId":"` + blobID + `","byteLength":12,"name":"a.txt"}`,
		`{"blobId":"` + blobID + `","byteLength":12,"mediaType":"text/plain","name":"a.txt"}`,
	} {
		if err := rowcodec.CheckBlobRef([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

func TestEncoderRefusesInvalidValues(t *testing.T) {
	c := rowcodec.NewColumns(allTypes(), 0)
	cases := map[string]func(v []rowcodec.Value){
		"null-in-non-nullable": func(v []rowcodec.Value) { v[0] = rowcodec.Null() },
		"wrong-kind":           func(v []rowcodec.Value) { v[1] = rowcodec.String("7") },
		"unsafe-integer":       func(v []rowcodec.Value) { v[1] = rowcodec.Int(1 << 60) },
		"json-not-json":        func(v []rowcodec.Value) { v[4] = rowcodec.JSON("{") },
		"absent-in-full-row":   func(v []rowcodec.Value) { v[3] = rowcodec.Absent },
		"invalid-utf8":         func(v []rowcodec.Value) { v[0] = rowcodec.String("\xff") },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			v := sampleRow()
			f(v)
			if _, err := c.AppendRow(nil, v); err == nil {
				t.Fatal("encoder accepted an invalid row")
			}
		})
	}
	if _, err := c.AppendSparse(nil, make([]rowcodec.Value, 9)); err == nil {
		t.Fatal("sparse encoder accepted a row without its primary key")
	}
}

func TestDecodeRowDoesNotAllocateWithCapacity(t *testing.T) {
	c := rowcodec.NewColumns(allTypes()[:6], 0)
	enc, _ := c.AppendRow(nil, sampleRow()[:6])
	dst := make([]rowcodec.Value, 6)
	n := testing.AllocsPerRun(100, func() {
		var err error
		if dst, err = c.DecodeRow(enc, dst); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("DecodeRow allocated %.0f times", n)
	}
}

func TestScopeStringRendersRowIDs(t *testing.T) {
	cases := []struct {
		v    rowcodec.Value
		want string
		ok   bool
	}{
		{rowcodec.String("n-1"), "n-1", true},
		{rowcodec.String(""), "", false},
		{rowcodec.Int(-42), "-42", true},
		{rowcodec.Bool(true), "true", true},
		{rowcodec.Float(1e21), "1e+21", true},
		{rowcodec.JSON(`{"a": 1}`), `{"a": 1}`, true},
		{rowcodec.Null(), "", false},
		{rowcodec.Bytes([]byte("x")), "", false},
		{rowcodec.Absent, "", false},
	}
	for _, c := range cases {
		got, ok := rowcodec.ScopeString(c.v)
		if got != c.want || ok != c.ok {
			t.Errorf("%v: got %q %v", c.v.Kind(), got, ok)
		}
	}
}

func TestValuePlain(t *testing.T) {
	raw := []byte{1, 2}
	tests := []struct {
		v    rowcodec.Value
		want any
	}{
		{rowcodec.Absent, nil},
		{rowcodec.Null(), nil},
		{rowcodec.String("s"), "s"},
		{rowcodec.JSON(`{"a":1}`), `{"a":1}`},
		{rowcodec.BlobRef(`{"blobId":"x"}`), `{"blobId":"x"}`},
		{rowcodec.Int(-7), int64(-7)},
		{rowcodec.Float(0.5), 0.5},
		{rowcodec.Bool(true), true},
		{rowcodec.Bytes(raw), []byte{1, 2}},
	}
	for _, tt := range tests {
		if got := tt.v.Plain(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v.Plain() = %#v, want %#v", tt.v.Kind(), got, tt.want)
		}
	}
	cell := rowcodec.Bytes(raw)
	b := cell.Plain().([]byte)
	b[0] = 9
	if cell.Raw()[0] != 1 {
		t.Error("Plain shares the cell's bytes")
	}
}

package wire

import (
	"math"
	"testing"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

func TestReaderRejectsNonCanonicalPrimitives(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		read func(r *Reader) error
	}{
		{"bool-byte-2", []byte{2}, func(r *Reader) error { _, err := r.Bool(); return err }},
		{"opt-presence-2", []byte{2}, func(r *Reader) error { _, err := r.Opt(); return err }},
		{"i64-above-safe", le64(MaxSafeInt + 1), func(r *Reader) error { _, err := r.I64(); return err }},
		{"i64-below-safe", le64(-MaxSafeInt - 1), func(r *Reader) error { _, err := r.I64(); return err }},
		{"str-invalid-utf8", []byte{2, 0, 0, 0, 0xc3, 0x28}, func(r *Reader) error { _, err := r.Str(); return err }},
		{"str-surrogate", []byte{3, 0, 0, 0, 0xed, 0xa0, 0x80}, func(r *Reader) error { _, err := r.Str(); return err }},
		{"bytes-length-past-end", []byte{0xff, 0xff, 0xff, 0xff, 1}, func(r *Reader) error { _, err := r.Bytes(); return err }},
		{"u32-truncated", []byte{1, 2}, func(r *Reader) error { _, err := r.U32(); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewReader(c.in)
			err := c.read(&r)
			if syncerr.CodeOf(err) != syncerr.InvalidRequest {
				t.Fatalf("want sync.invalid_request, got %v", err)
			}
		})
	}
}

func le64(v int64) []byte {
	var w Writer
	w.I64(v)
	return w.B
}

func TestRoundTripPrimitives(t *testing.T) {
	var w Writer
	w.U8(7)
	w.U16(0xbeef)
	w.U32(0xdeadbeef)
	w.I32(-5)
	w.I64(-MaxSafeInt)
	w.F64(math.Inf(-1))
	w.Bool(true)
	w.Opt(false)
	w.Str("héllo 𝄞")
	w.Bytes([]byte{0, 1})
	r := NewReader(w.B)
	r.SetString(string(w.B))
	u8, _ := r.U8()
	u16, _ := r.U16()
	u32, _ := r.U32()
	i32, _ := r.I32()
	i64, _ := r.I64()
	f64, _ := r.F64()
	b, _ := r.Bool()
	o, _ := r.Opt()
	s, _ := r.Str()
	bs, _ := r.Bytes()
	if u8 != 7 || u16 != 0xbeef || u32 != 0xdeadbeef || i32 != -5 || i64 != -MaxSafeInt || !math.IsInf(f64, -1) || !b || o || s != "héllo 𝄞" || len(bs) != 2 {
		t.Fatalf("round trip mismatch")
	}
	if err := r.Done("test"); err != nil {
		t.Fatal(err)
	}
}

func TestCompareUTF16OrdersByCodeUnits(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"a", "b", -1},
		{"a", "ab", -1},
		{"", "a", -1},
		{"x", "x", 0},
		// U+FF61 (BMP, unit 0xFF61) sorts after U+1F600 (units 0xD83D 0xDE00)
		// in UTF-16 order, though its UTF-8 bytes sort first.
		{"\uff61", "\U0001F600", 1},
		{"\U0001F600", "\uff61", -1},
		{"\ud7ff", "\U0001F600", -1},
		{"\U00010000", "\U00010001", -1},
		{"é", "z", 1},
	}
	for _, c := range cases {
		if got := CompareUTF16(c.a, c.b); got != c.want {
			t.Errorf("CompareUTF16(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestKeyAfterRejectsDuplicateAndUnsortedKeys(t *testing.T) {
	if err := KeyAfter("b", "a", false); err == nil {
		t.Fatal("unsorted keys accepted")
	}
	if err := KeyAfter("a", "a", false); err == nil {
		t.Fatal("duplicate keys accepted")
	}
	if err := KeyAfter("\U0001F600", "\uff61", false); err != nil {
		t.Fatalf("UTF-16 order rejected: %v", err)
	}
}

func TestReaderStrDoesNotAllocateWithBackingString(t *testing.T) {
	var w Writer
	for i := 0; i < 8; i++ {
		w.Str("value")
	}
	s := string(w.B)
	allocs := testing.AllocsPerRun(100, func() {
		r := NewReader(w.B)
		r.SetString(s)
		for i := 0; i < 8; i++ {
			if _, err := r.Str(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("Str allocated %.1f times per run", allocs)
	}
}

func TestCountRefusesCountsThatCannotFit(t *testing.T) {
	r := NewReader([]byte{3, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	if _, err := r.Count(2, "list"); err != nil {
		t.Fatalf("3 elements of 2 bytes fit in 8: %v", err)
	}
	r = NewReader([]byte{0xff, 0xff, 0xff, 0xff, 1})
	if _, err := r.Count(1, "list"); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("huge count accepted: %v", err)
	}
}

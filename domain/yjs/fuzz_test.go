package yjs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// fuzzLimits keep each fuzzed merge small enough to run thousands a second.
var fuzzLimits = Limits{MaxUpdateBytes: 1 << 16, MaxStructs: 1 << 14, MaxWork: 1 << 22}

func addReferenceSeeds(f *testing.F, n int) {
	fh, err := os.Open("testdata/reference.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for i := 0; i < n && sc.Scan(); i++ {
		var c referenceCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			f.Fatal(err)
		}
		f.Add(c.bytes(c.S), c.bytes(c.I))
	}
}

// FuzzMerge: any pair of byte strings either fails cleanly or merges;
// nothing panics (merge, unlike Merge, does not recover), the bounds hold
// and the merged state stays within a small multiple of its inputs (JSON
// numbers such as 1e20 are the largest expansion, about five times). That
// the state merges again is not a property: the reference fails to apply
// its own output for some garbage inputs, and so does this merger.
func FuzzMerge(f *testing.F) {
	addReferenceSeeds(f, 40)
	f.Add([]byte(nil), textAB)
	f.Add(textAB, afterA)
	f.Fuzz(func(t *testing.T, stored, incoming []byte) {
		out, err := merge(stored, incoming, fuzzLimits)
		if err != nil {
			return
		}
		if limit := 8*(len(stored)+len(incoming)) + 256; len(out) > limit {
			t.Fatalf("merged state of %d bytes from %d+%d", len(out), len(stored), len(incoming))
		}
	})
}

// FuzzAnyCodec: decoding an Any value and encoding it normalizes it once;
// a second round changes nothing.
func FuzzAnyCodec(f *testing.F) {
	for _, s := range []string{"7d2a", "7b3ff199999999999a", "7602017a7d0101317d02", "75027e7f", "740201ff", "7601095f5f70726f746f5f5f7600", "7a0000000000000005"} {
		f.Add(mustHex(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := decoder{buf: b}
		v, err := d.readAny(0)
		if err != nil {
			return
		}
		var e1 encoder
		if err := e1.writeAny(v); err != nil {
			return
		}
		d2 := decoder{buf: e1.buf}
		v2, err := d2.readAny(0)
		if err != nil {
			t.Fatalf("re-read %x: %v", e1.buf, err)
		}
		var e2 encoder
		if err := e2.writeAny(v2); err != nil || !bytes.Equal(e1.buf, e2.buf) {
			t.Fatalf("not stable: %x then %x (%v)", e1.buf, e2.buf, err)
		}
	})
}

// FuzzJSONContent: JSON content re-serializes to a text that parses to
// the same serialization, and through-Any normalization is stable.
func FuzzJSONContent(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, `"\ud800"`, `{"__proto__":1,"2":0,"1":0}`, `1e400`, `-0`, `[1.5e-7, 1e21]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseJSON(s)
		if err != nil {
			return
		}
		out := stringifyJSON(v)
		v2, err := parseJSON(out)
		if err != nil || stringifyJSON(v2) != out {
			t.Fatalf("%q -> %q does not round-trip (%v)", s, out, err)
		}
		n := stringifyJSON(throughAny(v))
		if stringifyJSON(throughAny(throughAny(v))) != n {
			t.Fatalf("through Any not stable for %q", s)
		}
	})
}

package canonjson

import (
	"bytes"
	"testing"
)

// FuzzParse: Valid and Parse agree, nothing panics, and serializing a
// parsed value yields a document that parses and serializes identically.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u00e9"],"b":{"c":null}}`, `"\ud800"`, `[true,false]`, `-0`, `{"1":1,"a":2,"0":3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := Parse(in)
		if (err == nil) != Valid(in) || ValidString(string(in)) != Valid(in) {
			t.Fatalf("Valid and Parse disagree on %q", in)
		}
		if err != nil {
			return
		}
		out := Marshal(v, "")
		v2, err := Parse(out)
		if err != nil {
			t.Fatalf("serialization %q does not parse: %v", out, err)
		}
		if out2 := Marshal(v2, ""); !bytes.Equal(out, out2) {
			t.Fatalf("not stable: %q then %q", out, out2)
		}
	})
}

package sqlstore

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDecodeScopes(t *testing.T) {
	for _, in := range []string{
		`{}`, ` { } `, `{"org":"a"}`, `{"a": "1", "b": "x y"}`, `{"k":"\u00e9"}`, `{"k":"a\"b"}`,
		`{"k":"é"}`, `{"a":"1","a":"2"}`, "{\"k\":\"\xff\"}",
	} {
		got, err := decodeScopes([]byte(in))
		want := map[string]string{}
		werr := json.Unmarshal([]byte(in), &want)
		if (err != nil) != (werr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%q: got %v %v, want %v %v", in, got, err, want, werr)
		}
	}
	for _, bad := range []string{`{"a":1}`, `{"a":"1"`, `["a"]`, `{"a":"1"} x`, `{"a" "1"}`} {
		if _, err := decodeScopes([]byte(bad)); err == nil {
			t.Errorf("%q: decoded", bad)
		}
	}
}

func FuzzDecodeScopes(f *testing.F) {
	f.Add([]byte(`{"a": "1", "b":"2"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return // empty means no scopes, by convention
		}
		got, err := decodeScopes(in)
		want := map[string]string{}
		werr := json.Unmarshal(in, &want)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%q: err %v vs %v", in, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %v vs %v", in, got, want)
		}
	})
}

package operations_test

import (
	"math"
	"testing"

	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

func must(v operations.Value, err error) operations.Value {
	if err != nil {
		panic(err)
	}
	return v
}

func str(s string) operations.Value { return must(operations.String(s)) }

// REMOTE.md §4: each kind and its encoded form.
func TestValueEncodingTable(t *testing.T) {
	tests := []struct {
		name string
		v    operations.Value
		want string
	}{
		{"null", operations.Null(), `{"t":"null"}`},
		{"boolean", operations.Bool(true), `{"t":"boolean","v":true}`},
		{"finite number", must(operations.Number(1.5)), `{"t":"number","v":1.5}`},
		{"integral number", must(operations.Number(42)), `{"t":"number","v":42}`},
		{"string", str("x"), `{"t":"string","v":"x"}`},
		{"string with escapes", str("a\"\n"), `{"t":"string","v":"a\"\n"}`},
		{"signed 64-bit integer", operations.Integer(42), `{"t":"integer","v":"42"}`},
		{"most negative integer", operations.Integer(math.MinInt64), `{"t":"integer","v":"-9223372036854775808"}`},
		{"bytes as padded base64", operations.Bytes([]byte{0, 1}), `{"t":"bytes","v":"AAE="}`},
		{"empty bytes", operations.Bytes(nil), `{"t":"bytes","v":""}`},
		{"array", must(operations.Array(operations.Null(), operations.Integer(1))), `{"t":"array","v":[{"t":"null"},{"t":"integer","v":"1"}]}`},
		{"object as pairs in order", must(operations.Object(
			operations.Field{Key: "b", Value: operations.Bool(false)},
			operations.Field{Key: "a", Value: str("y")},
		)), `{"t":"object","v":[["b",{"t":"boolean","v":false}],["a",{"t":"string","v":"y"}]]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.v.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("encode = %s, want %s", got, tt.want)
			}
			back, err := operations.Decode(got)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			again, _ := back.Encode()
			if string(again) != tt.want {
				t.Fatalf("round trip = %s, want %s", again, tt.want)
			}
		})
	}
}

func TestConstructorsRefuseWhatTheEncodingCannotCarry(t *testing.T) {
	if _, err := operations.Number(math.NaN()); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := operations.Number(math.Inf(1)); err == nil {
		t.Error("+Inf accepted")
	}
	if _, err := operations.String("\xff"); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
	if _, err := operations.Object(operations.Field{Key: "a", Value: operations.Null()}, operations.Field{Key: "a", Value: operations.Null()}); err == nil {
		t.Error("duplicate key accepted")
	}
	if _, err := operations.Array(operations.Value{}); err == nil {
		t.Error("zero Value accepted as an item")
	}
	if _, ok := operations.SafeNumber(1 << 53); ok {
		t.Error("2^53 accepted as a safe number")
	}
	if v, ok := operations.SafeNumber(1<<53 - 1); !ok || v.Kind() != operations.KindNumber {
		t.Error("2^53-1 refused")
	}
}

func TestDecodeRefusesMalformedValues(t *testing.T) {
	tests := []struct{ name, in string }{
		{"not JSON", `{`},
		{"trailing data", `{"t":"null"} {"t":"null"}`},
		{"not an object", `[1]`},
		{"no tag", `{"v":1}`},
		{"tag not a string", `{"t":1}`},
		{"unknown tag", `{"t":"date","v":"x"}`},
		{"missing v", `{"t":"string"}`},
		{"boolean of wrong type", `{"t":"boolean","v":"true"}`},
		{"number as string", `{"t":"number","v":"1"}`},
		{"number out of range", `{"t":"number","v":1e400}`},
		{"string of wrong type", `{"t":"string","v":1}`},
		{"integer as number", `{"t":"integer","v":42}`},
		{"integer with leading zero", `{"t":"integer","v":"042"}`},
		{"integer with plus", `{"t":"integer","v":"+1"}`},
		{"negative zero", `{"t":"integer","v":"-0"}`},
		{"integer with fraction", `{"t":"integer","v":"1.0"}`},
		{"integer past 2^63-1", `{"t":"integer","v":"9223372036854775808"}`},
		{"integer below -2^63", `{"t":"integer","v":"-9223372036854775809"}`},
		{"empty integer", `{"t":"integer","v":""}`},
		{"unpadded base64", `{"t":"bytes","v":"AAE"}`},
		{"url-safe base64", `{"t":"bytes","v":"-_8="}`},
		{"non-canonical base64 padding bits", `{"t":"bytes","v":"AAF="}`},
		{"array of wrong type", `{"t":"array","v":{}}`},
		{"bad array item", `{"t":"array","v":[1]}`},
		{"object of wrong type", `{"t":"object","v":{"a":{"t":"null"}}}`},
		{"object entry not a pair", `{"t":"object","v":[["a"]]}`},
		{"object key not a string", `{"t":"object","v":[[1,{"t":"null"}]]}`},
		{"duplicate object key", `{"t":"object","v":[["a",{"t":"null"}],["a",{"t":"null"}]]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := operations.Decode([]byte(tt.in))
			if syncerr.CodeOf(err) != syncerr.OperationInvalid {
				t.Fatalf("Decode(%s) = %v, want operation.invalid_request", tt.in, err)
			}
		})
	}
}

func TestDecodeBoundsNesting(t *testing.T) {
	deep := `{"t":"null"}`
	for range operations.MaxDepth + 1 {
		deep = `{"t":"array","v":[` + deep + `]}`
	}
	if _, err := operations.Decode([]byte(deep)); syncerr.CodeOf(err) != syncerr.OperationInvalid {
		t.Fatalf("nesting past MaxDepth: %v", err)
	}
	ok := `{"t":"null"}`
	for range operations.MaxDepth {
		ok = `{"t":"array","v":[` + ok + `]}`
	}
	if _, err := operations.Decode([]byte(ok)); err != nil {
		t.Fatalf("nesting at MaxDepth: %v", err)
	}
}

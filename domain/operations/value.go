// Package operations holds the wire encoding of the remote operation
// protocol (REMOTE.md revision 1): the recursively tagged JSON values, the
// request and response envelopes of POST <mount>/operations, and the
// declarative registered query a host states against its synced tables.
// Everything here is pure; running a query is the storage port's job.
package operations

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// ContentType is the content type of every request and response body
// (REMOTE.md header, §5).
const ContentType = "application/vnd.syncular.operations.v1+json"

// Kind is a tagged value's type (REMOTE.md §4).
type Kind uint8

// The eight value kinds, named on the wire by their tag.
const (
	KindNull Kind = iota + 1
	KindBoolean
	KindNumber
	KindString
	KindInteger
	KindBytes
	KindArray
	KindObject
)

var kindTags = [...]string{
	KindNull: "null", KindBoolean: "boolean", KindNumber: "number", KindString: "string",
	KindInteger: "integer", KindBytes: "bytes", KindArray: "array", KindObject: "object",
}

// String returns the wire tag ("null", "integer", ...).
func (k Kind) String() string {
	if k >= KindNull && k <= KindObject {
		return kindTags[k]
	}
	return "invalid"
}

// MaxDepth bounds the nesting of a decoded value, so a hostile body
// cannot exhaust the stack; real operation messages nest a few levels.
const MaxDepth = 64

// Value is one tagged value. The zero Value is invalid; build values with
// the constructors, which refuse what the encoding cannot carry.
type Value struct {
	kind   Kind
	b      bool
	f      float64
	i      int64
	s      string // string value, or the bytes of a bytes value
	items  []Value
	fields []Field
}

// Field is one key of an object value, in the object's order.
type Field struct {
	Key   string
	Value Value
}

// Null is the null value.
func Null() Value { return Value{kind: KindNull} }

// Bool is a boolean value.
func Bool(b bool) Value { return Value{kind: KindBoolean, b: b} }

// Number is a finite number; NaN and the infinities are refused.
func Number(f float64) (Value, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Value{}, invalid("number must be finite")
	}
	return Value{kind: KindNumber, f: f}, nil
}

// SafeNumber is a number value for an integer within ±(2^53−1), the range
// REMOTE.md allows for maxCommitSeq and commitSeq; ok is false outside it.
func SafeNumber(n int64) (Value, bool) {
	if n > maxSafeInteger || n < -maxSafeInteger {
		return Value{}, false
	}
	return Value{kind: KindNumber, f: float64(n)}, true
}

const maxSafeInteger = 1<<53 - 1

// String is a string value; it must be valid UTF-8.
func String(s string) (Value, error) {
	if !utf8.ValidString(s) {
		return Value{}, invalid("string is not valid UTF-8")
	}
	return Value{kind: KindString, s: s}, nil
}

// Integer is a signed 64-bit integer value.
func Integer(i int64) Value { return Value{kind: KindInteger, i: i} }

// Bytes is a bytes value (a copy of b).
func Bytes(b []byte) Value { return Value{kind: KindBytes, s: string(b)} }

// Array is an array value of valid items.
func Array(items ...Value) (Value, error) {
	for _, it := range items {
		if !it.Valid() {
			return Value{}, invalid("array item is not a value")
		}
	}
	return Value{kind: KindArray, items: append([]Value{}, items...)}, nil
}

// Object is an object value; keys must be distinct UTF-8 strings and
// values valid. Field order is kept (the encoding is a list of pairs).
func Object(fields ...Field) (Value, error) {
	seen := make(map[string]struct{}, len(fields))
	for _, f := range fields {
		if !utf8.ValidString(f.Key) {
			return Value{}, invalid("object key is not valid UTF-8")
		}
		if _, dup := seen[f.Key]; dup {
			return Value{}, invalid(fmt.Sprintf("duplicate object key %q", f.Key))
		}
		seen[f.Key] = struct{}{}
		if !f.Value.Valid() {
			return Value{}, invalid(fmt.Sprintf("object key %q has no value", f.Key))
		}
	}
	return Value{kind: KindObject, fields: append([]Field{}, fields...)}, nil
}

// Valid reports whether v was built by a constructor.
func (v Value) Valid() bool { return v.kind >= KindNull && v.kind <= KindObject }

// Kind returns the value's kind.
func (v Value) Kind() Kind { return v.kind }

// AsBool returns a boolean value.
func (v Value) AsBool() (bool, bool) { return v.b, v.kind == KindBoolean }

// AsNumber returns a number value.
func (v Value) AsNumber() (float64, bool) { return v.f, v.kind == KindNumber }

// AsString returns a string value.
func (v Value) AsString() (string, bool) { return v.s, v.kind == KindString }

// AsInteger returns an integer value.
func (v Value) AsInteger() (int64, bool) { return v.i, v.kind == KindInteger }

// AsBytes returns a copy of a bytes value.
func (v Value) AsBytes() ([]byte, bool) {
	if v.kind != KindBytes {
		return nil, false
	}
	return []byte(v.s), true
}

// Items returns an array's items (not to be modified).
func (v Value) Items() ([]Value, bool) { return v.items, v.kind == KindArray }

// Fields returns an object's fields in order (not to be modified).
func (v Value) Fields() ([]Field, bool) { return v.fields, v.kind == KindObject }

// Get returns an object's field by key.
func (v Value) Get(key string) (Value, bool) {
	for _, f := range v.fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return Value{}, false
}

// MarshalJSON encodes v in the tagged form of REMOTE.md §4.
func (v Value) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := v.encode(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Encode returns the tagged JSON text of v.
func (v Value) Encode() ([]byte, error) { return v.MarshalJSON() }

func (v Value) encode(b *bytes.Buffer) error {
	if !v.Valid() {
		return invalid("value is not built")
	}
	b.WriteString(`{"t":"`)
	b.WriteString(v.kind.String())
	b.WriteByte('"')
	switch v.kind {
	case KindNull:
		b.WriteByte('}')
		return nil
	case KindBoolean:
		b.WriteString(`,"v":`)
		b.WriteString(strconv.FormatBool(v.b))
	case KindNumber:
		b.WriteString(`,"v":`)
		b.WriteString(formatNumber(v.f))
	case KindString:
		b.WriteString(`,"v":`)
		writeJSONString(b, v.s)
	case KindInteger:
		b.WriteString(`,"v":"`)
		b.WriteString(strconv.FormatInt(v.i, 10))
		b.WriteByte('"')
	case KindBytes:
		b.WriteString(`,"v":"`)
		b.WriteString(base64.StdEncoding.EncodeToString([]byte(v.s)))
		b.WriteByte('"')
	case KindArray:
		b.WriteString(`,"v":[`)
		for i, it := range v.items {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := it.encode(b); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case KindObject:
		b.WriteString(`,"v":[`)
		for i, f := range v.fields {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			writeJSONString(b, f.Key)
			b.WriteByte(',')
			if err := f.Value.encode(b); err != nil {
				return err
			}
			b.WriteByte(']')
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return nil
}

// formatNumber renders a finite number the way JSON.stringify does for
// the values that matter here: integers without a fraction or exponent,
// everything else in the shortest form that reads back exactly.
func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a valid UTF-8 string always marshals
	b.Write(enc)
}

// Decode parses one tagged value. It refuses unknown tags, a missing or
// mistyped "v", non-finite numbers, integers that are not in canonical
// decimal form or outside the signed 64-bit range, base64 that is not the
// canonical padded form, malformed or duplicate object pairs, and nesting
// past MaxDepth. Every refusal is operation.invalid_request.
func Decode(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return Value{}, invalid("body is not JSON")
	}
	if dec.More() {
		return Value{}, invalid("trailing data after the value")
	}
	if _, err := dec.Token(); err == nil {
		return Value{}, invalid("trailing data after the value")
	}
	return decodeValue(raw, 0)
}

func decodeValue(raw json.RawMessage, depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, invalid("value nests too deeply")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return Value{}, invalid("value is not a tagged object")
	}
	var tag string
	if err := json.Unmarshal(m["t"], &tag); err != nil || m["t"] == nil {
		return Value{}, invalid("value has no string tag")
	}
	v, hasV := m["v"]
	if tag != "null" && !hasV {
		return Value{}, invalid(fmt.Sprintf("%s value has no v", tag))
	}
	switch tag {
	case "null":
		return Null(), nil
	case "boolean":
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return Value{}, invalid("invalid boolean value")
		}
		return Bool(b), nil
	case "number":
		var f float64
		if !isJSONNumber(v) || json.Unmarshal(v, &f) != nil {
			return Value{}, invalid("invalid number value")
		}
		return Number(f)
	case "string":
		var s string
		if !isJSONString(v) || json.Unmarshal(v, &s) != nil {
			return Value{}, invalid("invalid string value")
		}
		return String(s)
	case "integer":
		var s string
		if !isJSONString(v) || json.Unmarshal(v, &s) != nil {
			return Value{}, invalid("invalid integer value")
		}
		i, err := parseCanonicalInt(s)
		if err != nil {
			return Value{}, err
		}
		return Integer(i), nil
	case "bytes":
		var s string
		if !isJSONString(v) || json.Unmarshal(v, &s) != nil {
			return Value{}, invalid("invalid bytes value")
		}
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || base64.StdEncoding.EncodeToString(b) != s {
			return Value{}, invalid("bytes value is not canonical padded base64")
		}
		return Bytes(b), nil
	case "array":
		var items []json.RawMessage
		if !isJSONArray(v) || json.Unmarshal(v, &items) != nil {
			return Value{}, invalid("invalid array value")
		}
		out := make([]Value, len(items))
		for i, it := range items {
			var err error
			if out[i], err = decodeValue(it, depth+1); err != nil {
				return Value{}, err
			}
		}
		return Value{kind: KindArray, items: out}, nil
	case "object":
		var pairs []json.RawMessage
		if !isJSONArray(v) || json.Unmarshal(v, &pairs) != nil {
			return Value{}, invalid("invalid object value")
		}
		fields := make([]Field, len(pairs))
		for i, p := range pairs {
			var pair []json.RawMessage
			if !isJSONArray(p) || json.Unmarshal(p, &pair) != nil || len(pair) != 2 || !isJSONString(pair[0]) {
				return Value{}, invalid("invalid object entry")
			}
			if json.Unmarshal(pair[0], &fields[i].Key) != nil {
				return Value{}, invalid("invalid object key")
			}
			var err error
			if fields[i].Value, err = decodeValue(pair[1], depth+1); err != nil {
				return Value{}, err
			}
		}
		return Object(fields...)
	default:
		return Value{}, invalid(fmt.Sprintf("unknown value tag %q", tag))
	}
}

// parseCanonicalInt accepts -?(0|[1-9][0-9]*) within the int64 range.
func parseCanonicalInt(s string) (int64, error) {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	ok := len(digits) > 0 && (digits == "0" || digits[0] != '0') && s != "-0"
	for i := 0; ok && i < len(digits); i++ {
		ok = digits[i] >= '0' && digits[i] <= '9'
	}
	if !ok {
		return 0, invalid("integer value is not canonical decimal")
	}
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalid("integer value exceeds the signed 64-bit range")
	}
	return i, nil
}

func firstByte(raw json.RawMessage) byte {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

func isJSONString(raw json.RawMessage) bool { return firstByte(raw) == '"' }
func isJSONArray(raw json.RawMessage) bool  { return firstByte(raw) == '[' }
func isJSONNumber(raw json.RawMessage) bool {
	c := firstByte(raw)
	return c == '-' || (c >= '0' && c <= '9')
}

func invalid(reason string) *syncerr.Error {
	return syncerr.Newf(syncerr.OperationInvalid, "%s", reason)
}

// Package rowcodec is the schema-driven row codec of SPEC §2.4: full rows
// (COMMIT change payloads, SSG2 row records, conflict serverRow) and v3
// sparse rows (push payloads), the SSG2 rows-segment format of §5.2
// (encoded and decoded block by block), and the §11 renderings of both.
//
// Decoded values alias the input bytes: no copy is made for strings, json,
// bytes or crdt values, and a row decodes without allocating when the
// caller passes a destination slice with enough capacity.
package rowcodec

import (
	"bytes"
	"math"
	"strconv"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/schema"
)

// Kind is what a Value holds.
type Kind uint8

// Value kinds. The zero Value is Absent (a column a sparse row omits).
const (
	KindAbsent Kind = iota
	KindNull
	KindString
	KindInteger
	KindFloat
	KindBoolean
	KindJSON
	KindBytes
	KindBlobRef
	KindCRDT
)

var kindNames = [...]string{"absent", "null", "string", "integer", "float", "boolean", "json", "bytes", "blob_ref", "crdt"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// KindOf returns the value kind a column of type t holds when not NULL.
func KindOf(t schema.ColumnType) Kind {
	switch t {
	case schema.TypeString:
		return KindString
	case schema.TypeInteger:
		return KindInteger
	case schema.TypeFloat:
		return KindFloat
	case schema.TypeBoolean:
		return KindBoolean
	case schema.TypeJSON:
		return KindJSON
	case schema.TypeBytes:
		return KindBytes
	case schema.TypeBlobRef:
		return KindBlobRef
	case schema.TypeCRDT:
		return KindCRDT
	}
	return KindAbsent
}

// Value is one decoded cell. Text kinds (string, json, blob_ref) and binary
// kinds (bytes, crdt) keep their raw bytes; numbers and booleans are held
// inline. Values are small (40 bytes) and never allocate on decode.
type Value struct {
	kind Kind
	n    uint64
	b    []byte
}

// Absent is the zero Value: a column a sparse row does not carry.
var Absent = Value{}

// Null returns a NULL value.
func Null() Value { return Value{kind: KindNull} }

// String returns a string value.
func String(s string) Value { return Value{kind: KindString, b: []byte(s)} }

// StringBytes returns a string value over b (not copied).
func StringBytes(b []byte) Value { return Value{kind: KindString, b: b} }

// Int returns an integer value.
func Int(v int64) Value { return Value{kind: KindInteger, n: uint64(v)} }

// Float returns a float value.
func Float(v float64) Value { return Value{kind: KindFloat, n: math.Float64bits(v)} }

// Bool returns a boolean value.
func Bool(v bool) Value {
	if v {
		return Value{kind: KindBoolean, n: 1}
	}
	return Value{kind: KindBoolean}
}

// JSON returns a json value holding the raw document text (kept verbatim).
func JSON(raw string) Value { return Value{kind: KindJSON, b: []byte(raw)} }

// JSONBytes returns a json value over raw (not copied).
func JSONBytes(raw []byte) Value { return Value{kind: KindJSON, b: raw} }

// BlobRef returns a blob_ref value holding the canonical BlobRef JSON text.
func BlobRef(raw string) Value { return Value{kind: KindBlobRef, b: []byte(raw)} }

// Bytes returns a bytes value over b (not copied).
func Bytes(b []byte) Value { return Value{kind: KindBytes, b: b} }

// CRDT returns a crdt value over b (not copied).
func CRDT(b []byte) Value { return Value{kind: KindCRDT, b: b} }

// Kind returns the value's kind.
func (v Value) Kind() Kind { return v.kind }

// IsAbsent reports whether the value is absent (sparse rows only).
func (v Value) IsAbsent() bool { return v.kind == KindAbsent }

// IsNull reports whether the value is NULL.
func (v Value) IsNull() bool { return v.kind == KindNull }

// Int returns an integer value's number.
func (v Value) Int() int64 { return int64(v.n) }

// Float returns a float value's number.
func (v Value) Float() float64 { return math.Float64frombits(v.n) }

// Bool returns a boolean value's truth.
func (v Value) Bool() bool { return v.n != 0 }

// Raw returns the bytes of a text or binary value (not copied).
func (v Value) Raw() []byte { return v.b }

// Text returns a text value (string, json, blob_ref) as a string.
func (v Value) Text() string { return string(v.b) }

// Plain returns the cell as the plain Go value storage and hooks use: nil
// (absent or NULL), string (string, json, blob_ref), int64, float64, bool
// or a fresh []byte (bytes, crdt).
func (v Value) Plain() any {
	switch v.kind {
	case KindString, KindJSON, KindBlobRef:
		return v.Text()
	case KindInteger:
		return v.Int()
	case KindFloat:
		return v.Float()
	case KindBoolean:
		return v.Bool()
	case KindBytes, KindCRDT:
		return append([]byte(nil), v.b...)
	default:
		return nil
	}
}

// Equal reports whether two values are identical (floats by bit pattern).
func (v Value) Equal(o Value) bool {
	return v.kind == o.kind && v.n == o.n && bytes.Equal(v.b, o.b)
}

// ScopeString renders a cell the way stored scope values and rowIds are
// rendered (§2.2, §3.1): text kinds as their text (json and blob_ref as the
// raw document), integers in decimal, floats in ECMAScript number form,
// booleans as true/false. NULL, absent, bytes and crdt cells and the empty
// string have no rendering (ok is false).
func ScopeString(v Value) (s string, ok bool) {
	switch v.kind {
	case KindString, KindJSON, KindBlobRef:
		s = string(v.b)
	case KindInteger:
		s = strconv.FormatInt(v.Int(), 10)
	case KindFloat:
		s = string(canonjson.AppendNumber(nil, v.Float()))
		if math.IsNaN(v.Float()) {
			s = "NaN"
		} else if math.IsInf(v.Float(), 1) {
			s = "Infinity"
		} else if math.IsInf(v.Float(), -1) {
			s = "-Infinity"
		}
	case KindBoolean:
		s = strconv.FormatBool(v.Bool())
	default:
		return "", false
	}
	return s, s != ""
}

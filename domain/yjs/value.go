package yjs

import (
	"errors"
	"math"

	"github.com/syncd-dev/syncd/domain/canonjson"
)

// Values of Any and JSON content are modelled as the JavaScript values the
// reference holds, because it re-encodes them from those values: a number
// is a double whatever its wire form, object keys follow JavaScript
// property order (array-index keys first), and strings are generalized
// UTF-8 (a lone surrogate from a JSON \u escape survives until a UTF-8
// encoder replaces it).
//
//	nil                null
//	undefinedValue     undefined
//	bool, float64      booleans, numbers
//	bigInt             bigint (Any only)
//	string             strings
//	[]any              arrays
//	*canonjson.Object  objects
//	*byteArray         Uint8Array (Any only)
//	*poisonedObject    an Any object whose prototype chain holds a
//	                   Uint8Array: the reference fails to encode it

type undefinedValue struct{}

type bigInt int64

type byteArray struct{ b []byte }

type poisonedObject struct{ o *canonjson.Object }

var errPoisoned = errors.New("yjs: an Any object inherits from a byte array and cannot be encoded")

const (
	anyUndefined = 127
	anyNull      = 126
	anyInteger   = 125
	anyFloat32   = 124
	anyFloat64   = 123
	anyBigInt    = 122
	anyFalse     = 121
	anyTrue      = 120
	anyString    = 119
	anyObject    = 118
	anyArray     = 117
	anyBytes     = 116
)

// readAny decodes one lib0 Any value. An object key "__proto__" is an
// assignment to the prototype in JavaScript, not a member: it disappears,
// and a byte array assigned there poisons the object.
func (d *decoder) readAny(depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, errTooDeep
	}
	tag, err := d.byte()
	if err != nil {
		return nil, err
	}
	switch tag {
	case anyUndefined:
		return undefinedValue{}, nil
	case anyNull:
		return nil, nil
	case anyInteger:
		return d.varInt()
	case anyFloat32:
		return d.float32()
	case anyFloat64:
		return d.float64()
	case anyBigInt:
		v, err := d.bigInt64()
		return bigInt(v), err
	case anyFalse:
		return false, nil
	case anyTrue:
		return true, nil
	case anyString:
		return d.varString()
	case anyObject:
		n, err := d.varUint()
		if err != nil {
			return nil, err
		}
		if n > uint64(d.remaining()) {
			return nil, errEOF
		}
		o := canonjson.NewObject(int(min(n, 16)))
		poisoned := false
		for range n {
			k, err := d.varString()
			if err != nil {
				return nil, err
			}
			v, err := d.readAny(depth + 1)
			if err != nil {
				return nil, err
			}
			if k == "__proto__" {
				switch v.(type) {
				case *byteArray, *poisonedObject:
					poisoned = true
				case nil, []any, *canonjson.Object:
					poisoned = false
				} // a primitive prototype is ignored
				continue
			}
			o.Set(k, v)
		}
		if poisoned {
			return &poisonedObject{o}, nil
		}
		return o, nil
	case anyArray:
		n, err := d.varUint()
		if err != nil {
			return nil, err
		}
		if n > uint64(d.remaining()) {
			return nil, errEOF
		}
		arr := make([]any, 0, min(n, 64))
		for range n {
			v, err := d.readAny(depth + 1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		return arr, nil
	case anyBytes:
		b, err := d.varBytes()
		if err != nil {
			return nil, err
		}
		return &byteArray{append([]byte(nil), b...)}, nil
	}
	return nil, errors.New("yjs: unknown Any tag")
}

// writeAny encodes v as lib0 does: an integral number within ±(2^31-1) as
// a varint, else a float32 when that is exact, else a float64.
func (e *encoder) writeAny(v any) error {
	switch x := v.(type) {
	case string:
		e.byte(anyString)
		e.varString(x)
	case float64:
		switch {
		case x == math.Trunc(x) && !math.IsInf(x, 0) && math.Abs(x) <= math.MaxInt32:
			e.byte(anyInteger)
			e.varInt(x)
		case float64(float32(x)) == x:
			e.byte(anyFloat32)
			e.float32(float32(x))
		default:
			e.byte(anyFloat64)
			e.float64(x)
		}
	case bigInt:
		e.byte(anyBigInt)
		e.bigInt64(int64(x))
	case nil:
		e.byte(anyNull)
	case []any:
		e.byte(anyArray)
		e.varUint(uint64(len(x)))
		for _, el := range x {
			if err := e.writeAny(el); err != nil {
				return err
			}
		}
	case *byteArray:
		e.byte(anyBytes)
		e.varBytes(x.b)
	case *canonjson.Object:
		e.byte(anyObject)
		keys := x.Keys()
		e.varUint(uint64(len(keys)))
		for _, k := range keys {
			e.varString(k)
			el, _ := x.Get(k)
			if err := e.writeAny(el); err != nil {
				return err
			}
		}
	case bool:
		if x {
			e.byte(anyTrue)
		} else {
			e.byte(anyFalse)
		}
	case *poisonedObject:
		return errPoisoned
	default:
		e.byte(anyUndefined)
	}
	return nil
}

// throughAny is the value a JSON value becomes after an Any round trip
// (the reference's v2 encoding stores format and embed values as Any):
// lone surrogates become U+FFFD and a "__proto__" member disappears.
func throughAny(v any) any {
	switch x := v.(type) {
	case string:
		return wellFormed(x)
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = throughAny(el)
		}
		return out
	case *canonjson.Object:
		keys := x.Keys()
		o := canonjson.NewObject(len(keys))
		for _, k := range keys {
			el, _ := x.Get(k)
			k = wellFormed(k)
			el = throughAny(el)
			if k == "__proto__" {
				continue // a prototype assignment (JSON holds no byte arrays)
			}
			o.Set(k, el)
		}
		return o
	}
	return v
}

// strictEqual is JavaScript ===: primitives by value (NaN unequal to
// itself, -0 equal to 0), objects by identity. Arrays compare by backing
// store; two empty arrays count as distinct, which is only wrong for an
// array compared with itself, a case the formatting cleanup never meets.
func strictEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case undefinedValue:
		_, ok := b.(undefinedValue)
		return ok
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case bigInt:
		y, ok := b.(bigInt)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		return ok && len(x) > 0 && len(x) == len(y) && &x[0] == &y[0]
	case *canonjson.Object:
		y, ok := b.(*canonjson.Object)
		return ok && x == y
	case *byteArray:
		y, ok := b.(*byteArray)
		return ok && x == y
	case *poisonedObject:
		y, ok := b.(*poisonedObject)
		return ok && x == y
	}
	return false
}

// jsonDepth is the nesting depth of a parsed JSON value.
func jsonDepth(v any) int {
	switch x := v.(type) {
	case []any:
		d := 0
		for _, el := range x {
			d = max(d, jsonDepth(el))
		}
		return d + 1
	case *canonjson.Object:
		d := 0
		for _, k := range x.Keys() {
			el, _ := x.Get(k)
			d = max(d, jsonDepth(el))
		}
		return d + 1
	}
	return 0
}

// parseJSON is JSON.parse over a decoded string.
func parseJSON(s string) (any, error) {
	v, err := canonjson.ParseString(s)
	if err != nil {
		return nil, errors.New("yjs: malformed JSON content")
	}
	if jsonDepth(v) > maxValueDepth {
		return nil, errTooDeep
	}
	return v, nil
}

// stringifyJSON is JSON.stringify of a value JSON.parse produced.
func stringifyJSON(v any) string { return string(canonjson.Marshal(v, "")) }

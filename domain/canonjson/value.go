// Package canonjson holds the JSON the protocol needs beyond the wire:
// the §11.2 canonical JSON and §3.5 scope digest (contractual), a strict
// RFC 8259 validator used by the codecs for json-typed values, and a small
// ordered JSON value model with the parse and serialization semantics of
// the reference renderer (§11.1), so debug renderings match the golden
// vectors byte for byte.
package canonjson

import (
	"strconv"
)

// Value is a JSON value: nil (null), bool, int64, float64, string, []Value
// or *Object.
type Value = any

// Object is a JSON object with ordered members. Set follows the semantics
// of a JavaScript object: setting an existing key replaces its value in
// place, and array-index keys ("0", "1", …) serialize first in numeric
// order, as JSON.stringify emits them.
type Object struct {
	keys []string
	vals []Value
	idx  map[string]int
}

// NewObject returns an empty object with room for n members.
func NewObject(n int) *Object {
	return &Object{keys: make([]string, 0, n), vals: make([]Value, 0, n)}
}

// Set sets key to v.
func (o *Object) Set(key string, v Value) *Object {
	if i, ok := o.lookup(key); ok {
		o.vals[i] = v
		return o
	}
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, v)
	if o.idx != nil {
		o.idx[key] = len(o.keys) - 1
	} else if len(o.keys) > 8 {
		o.idx = make(map[string]int, len(o.keys)*2)
		for i, k := range o.keys {
			o.idx[k] = i
		}
	}
	return o
}

func (o *Object) lookup(key string) (int, bool) {
	if o.idx != nil {
		i, ok := o.idx[key]
		return i, ok
	}
	for i, k := range o.keys {
		if k == key {
			return i, true
		}
	}
	return 0, false
}

// Get returns the value of key.
func (o *Object) Get(key string) (Value, bool) {
	if i, ok := o.lookup(key); ok {
		return o.vals[i], true
	}
	return nil, false
}

// Has reports whether key is a member.
func (o *Object) Has(key string) bool { _, ok := o.lookup(key); return ok }

// Len returns the number of members.
func (o *Object) Len() int { return len(o.keys) }

// Keys returns the member keys in serialization order.
func (o *Object) Keys() []string {
	order := o.order()
	out := make([]string, len(order))
	for i, j := range order {
		out[i] = o.keys[j]
	}
	return out
}

// order returns member positions in JavaScript property order.
func (o *Object) order() []int {
	out := make([]int, 0, len(o.keys))
	var idxKeys []int
	for i, k := range o.keys {
		if isArrayIndex(k) {
			idxKeys = append(idxKeys, i)
		}
	}
	if len(idxKeys) > 1 {
		// Insertion sort by numeric value (few such keys in practice).
		for a := 1; a < len(idxKeys); a++ {
			for b := a; b > 0 && arrayIndex(o.keys[idxKeys[b]]) < arrayIndex(o.keys[idxKeys[b-1]]); b-- {
				idxKeys[b], idxKeys[b-1] = idxKeys[b-1], idxKeys[b]
			}
		}
	}
	out = append(out, idxKeys...)
	for i, k := range o.keys {
		if !isArrayIndex(k) {
			out = append(out, i)
		}
	}
	return out
}

func isArrayIndex(k string) bool {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < '0' || k[i] > '9' {
			return false
		}
	}
	return arrayIndex(k) <= 4294967294
}

func arrayIndex(k string) uint64 {
	v, _ := strconv.ParseUint(k, 10, 64)
	return v
}

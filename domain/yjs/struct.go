package yjs

import (
	"unicode/utf16"

	"github.com/syncd-dev/syncd/domain/canonjson"
)

// ID names one clock tick of one client: structs cover runs of them.
type ID struct {
	Client uint64
	Clock  uint64
}

type kind uint8

const (
	kindGC   kind = iota // garbage-collected run: only its length is known
	kindSkip             // a gap in an update (never stored in a document)
	kindItem
)

// Struct kinds and content refs as the info byte's low five bits name them.
const (
	refGC      = 0
	refDeleted = 1
	refJSON    = 2
	refBinary  = 3
	refString  = 4
	refEmbed   = 5
	refFormat  = 6
	refType    = 7
	refAny     = 8
	refDoc     = 9
	refSkip    = 10
)

// Info byte flags.
const (
	infoOrigin      = 0x80
	infoRightOrigin = 0x40
	infoParentSub   = 0x20
	infoRefMask     = 0x1F
)

// Type refs of nested shared types.
const (
	typeArray       = 0
	typeMap         = 1
	typeText        = 2
	typeXMLElement  = 3
	typeXMLFragment = 4
	typeXMLHook     = 5
	typeXMLText     = 6
	typeRoot        = -1 // a top-level type, named by its key
)

type parentKind uint8

const (
	parentNone parentKind = iota
	parentType            // an integrated shared type
	parentName            // a top-level type's key (a decoded update's form)
	parentID              // the item holding the parent type
)

type parentRef struct {
	kind parentKind
	t    *ytype
	name string
	id   ID
}

// block is one struct: a GC run, a Skip, or an Item. Items carry the
// linked-list position inside their parent once integrated.
type block struct {
	kind   kind
	id     ID
	length uint64

	origin, rightOrigin       ID
	hasOrigin, hasRightOrigin bool
	left, right               *block
	parent                    parentRef
	parentSub                 string
	hasParentSub              bool
	content                   content
	deleted                   bool
	countable                 bool
}

func (b *block) lastID() ID { return ID{b.id.Client, b.id.Clock + b.length - 1} }

func (b *block) end() uint64 { return b.id.Clock + b.length }

// ytype is a shared type: a list (start) and a map (keys in insertion
// order, each naming its latest item).
type ytype struct {
	ref      int
	name     string // node name of an XML element, hook name of a hook
	rootName string
	item     *block
	start    *block
	mapKeys  []string
	mapVals  map[string]*block
	// hasFormatting is set when a format item is integrated into it; the
	// reference then cleans redundant formats after remote changes.
	hasFormatting bool
	depth         int
}

func (t *ytype) mapGet(k string) *block {
	if t.mapVals == nil {
		return nil
	}
	return t.mapVals[k]
}

func (t *ytype) mapSet(k string, b *block) {
	if t.mapVals == nil {
		t.mapVals = map[string]*block{}
	}
	if _, ok := t.mapVals[k]; !ok {
		t.mapKeys = append(t.mapKeys, k)
	}
	t.mapVals[k] = b
}

// isText reports whether the reference instantiates the type as a text
// (YText or YXmlText), whose observer triggers the formatting cleanup.
func (t *ytype) isText() bool { return t.ref == typeText || t.ref == typeXMLText }

type content interface {
	length() uint64
	countable() bool
	ref() byte
	// splice keeps [0, off) and returns [off, length).
	splice(off uint64) content
	mergeWith(right content) bool
	clone() content
}

type contentDeleted struct{ n uint64 }
type contentJSON struct{ arr []any }
type contentBinary struct{ b []byte }
type contentString struct{ s []uint16 }
type contentEmbed struct{ v any }
type contentFormat struct {
	key string
	v   any
}
type contentType struct{ t *ytype }
type contentAny struct{ arr []any }
type contentDoc struct {
	guid string
	opts *canonjson.Object
}

func (c *contentDeleted) length() uint64 { return c.n }
func (c *contentJSON) length() uint64    { return uint64(len(c.arr)) }
func (c *contentBinary) length() uint64  { return 1 }
func (c *contentString) length() uint64  { return uint64(len(c.s)) }
func (c *contentEmbed) length() uint64   { return 1 }
func (c *contentFormat) length() uint64  { return 1 }
func (c *contentType) length() uint64    { return 1 }
func (c *contentAny) length() uint64     { return uint64(len(c.arr)) }
func (c *contentDoc) length() uint64     { return 1 }

func (c *contentDeleted) countable() bool { return false }
func (c *contentJSON) countable() bool    { return true }
func (c *contentBinary) countable() bool  { return true }
func (c *contentString) countable() bool  { return true }
func (c *contentEmbed) countable() bool   { return true }
func (c *contentFormat) countable() bool  { return false }
func (c *contentType) countable() bool    { return true }
func (c *contentAny) countable() bool     { return true }
func (c *contentDoc) countable() bool     { return true }

func (c *contentDeleted) ref() byte { return refDeleted }
func (c *contentJSON) ref() byte    { return refJSON }
func (c *contentBinary) ref() byte  { return refBinary }
func (c *contentString) ref() byte  { return refString }
func (c *contentEmbed) ref() byte   { return refEmbed }
func (c *contentFormat) ref() byte  { return refFormat }
func (c *contentType) ref() byte    { return refType }
func (c *contentAny) ref() byte     { return refAny }
func (c *contentDoc) ref() byte     { return refDoc }

func (c *contentDeleted) splice(off uint64) content {
	r := &contentDeleted{c.n - off}
	c.n = off
	return r
}

func (c *contentJSON) splice(off uint64) content {
	r := &contentJSON{append([]any(nil), c.arr[off:]...)}
	c.arr = c.arr[:off:off]
	return r
}

func (c *contentAny) splice(off uint64) content {
	r := &contentAny{append([]any(nil), c.arr[off:]...)}
	c.arr = c.arr[:off:off]
	return r
}

// splice of a string never leaves half a surrogate pair on either side:
// the reference replaces both halves with U+FFFD.
func (c *contentString) splice(off uint64) content {
	r := &contentString{append([]uint16(nil), c.s[off:]...)}
	c.s = c.s[:off:off]
	if off > 0 && c.s[off-1] >= 0xD800 && c.s[off-1] <= 0xDBFF {
		c.s[off-1] = 0xFFFD
		if len(r.s) > 0 {
			r.s[0] = 0xFFFD
		} else {
			r.s = []uint16{0xFFFD}
		}
	}
	return r
}

// Single-unit contents are never split (their length is 1).
func (c *contentBinary) splice(uint64) content { panic("yjs: split of a unit content") }
func (c *contentEmbed) splice(uint64) content  { panic("yjs: split of a unit content") }
func (c *contentFormat) splice(uint64) content { panic("yjs: split of a unit content") }
func (c *contentType) splice(uint64) content   { panic("yjs: split of a unit content") }
func (c *contentDoc) splice(uint64) content    { panic("yjs: split of a unit content") }

func (c *contentDeleted) mergeWith(r content) bool { c.n += r.(*contentDeleted).n; return true }
func (c *contentJSON) mergeWith(r content) bool {
	c.arr = append(c.arr[:len(c.arr):len(c.arr)], r.(*contentJSON).arr...)
	return true
}
func (c *contentString) mergeWith(r content) bool {
	c.s = append(c.s[:len(c.s):len(c.s)], r.(*contentString).s...)
	return true
}
func (c *contentAny) mergeWith(r content) bool {
	c.arr = append(c.arr[:len(c.arr):len(c.arr)], r.(*contentAny).arr...)
	return true
}
func (c *contentBinary) mergeWith(content) bool { return false }
func (c *contentEmbed) mergeWith(content) bool  { return false }
func (c *contentFormat) mergeWith(content) bool { return false }
func (c *contentType) mergeWith(content) bool   { return false }
func (c *contentDoc) mergeWith(content) bool    { return false }

func (c *contentDeleted) clone() content { return &contentDeleted{c.n} }
func (c *contentJSON) clone() content    { return &contentJSON{append([]any(nil), c.arr...)} }
func (c *contentBinary) clone() content  { return &contentBinary{c.b} }
func (c *contentString) clone() content  { return &contentString{append([]uint16(nil), c.s...)} }
func (c *contentEmbed) clone() content   { return &contentEmbed{c.v} }
func (c *contentFormat) clone() content  { return &contentFormat{c.key, c.v} }

// clone of a type content is a fresh, unintegrated type of the same kind,
// as decoding the content again yields.
func (c *contentType) clone() content {
	return &contentType{&ytype{ref: c.t.ref, name: c.t.name}}
}
func (c *contentAny) clone() content { return &contentAny{append([]any(nil), c.arr...)} }
func (c *contentDoc) clone() content { return &contentDoc{c.guid, c.opts} }

// stringOf encodes UTF-16 as UTF-8, a lone surrogate as U+FFFD.
func stringOf(u []uint16) string { return string(utf16.Decode(u)) }

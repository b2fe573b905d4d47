package yjs

import (
	"errors"

	"github.com/syncd-dev/syncd/domain/canonjson"
)

var (
	errUnknownContent = errors.New("yjs: unknown struct content")
	errUnknownType    = errors.New("yjs: unknown shared type")
	errZeroLength     = errors.New("yjs: zero-length struct")
	errSubdocGUID     = errors.New("yjs: subdocument options name a guid that is not a string")
)

// clientBlock is one client's run of structs in an update, in clock order.
type clientBlock struct {
	client  uint64
	clock   uint64
	structs []*block
}

// readMode selects between the two ways the reference decodes structs:
// into a document (a top-level parent becomes that document's type; any
// info byte whose low bits say 10 is a Skip) or lazily (the parent stays
// a key; only the exact byte 10 is a Skip).
type readMode uint8

const (
	readIntoDoc readMode = iota
	readLazy
)

type reader struct {
	d    decoder
	doc  *doc
	mode readMode
	lim  *budget
}

// structBlocks reads the struct section of a v1 update.
func (r *reader) structBlocks() ([]clientBlock, error) {
	n, err := r.d.varUint()
	if err != nil {
		return nil, err
	}
	if n > uint64(r.d.remaining()) {
		return nil, errEOF
	}
	blocks := make([]clientBlock, 0, n)
	for range n {
		count, err := r.d.varUint()
		if err != nil {
			return nil, err
		}
		// Every struct takes at least two bytes; the budget is checked
		// before the run's structs are allocated.
		if count > uint64(r.d.remaining()/2) {
			return nil, errEOF
		}
		if err := r.lim.addStructs(int(count)); err != nil {
			return nil, err
		}
		client, err := r.d.varUint()
		if err != nil {
			return nil, err
		}
		clock, err := r.d.varUint()
		if err != nil {
			return nil, err
		}
		if err := r.lim.clock(clock); err != nil {
			return nil, err
		}
		b := clientBlock{client: client, clock: clock, structs: make([]*block, 0, count)}
		slab := make([]block, count) // one allocation for the run's structs
		for i := range count {
			s := &slab[i]
			if err := r.structAt(s, ID{client, clock}); err != nil {
				return nil, err
			}
			if s.length == 0 {
				return nil, errZeroLength
			}
			clock += s.length
			if err := r.lim.clock(clock); err != nil {
				return nil, err
			}
			b.structs = append(b.structs, s)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

func (r *reader) structAt(it *block, id ID) error {
	info, err := r.d.byte()
	if err != nil {
		return err
	}
	isSkip := info == refSkip
	if r.mode == readIntoDoc {
		isSkip = info&infoRefMask == refSkip
	}
	switch {
	case info&infoRefMask == refGC:
		n, err := r.d.varUint()
		if err != nil {
			return err
		}
		*it = block{kind: kindGC, id: id, length: n}
		return nil
	case isSkip:
		n, err := r.d.varUint()
		if err != nil {
			return err
		}
		*it = block{kind: kindSkip, id: id, length: n}
		return nil
	}
	*it = block{kind: kindItem, id: id}
	if info&infoOrigin != 0 {
		if it.origin, err = r.id(); err != nil {
			return err
		}
		it.hasOrigin = true
	}
	if info&infoRightOrigin != 0 {
		if it.rightOrigin, err = r.id(); err != nil {
			return err
		}
		it.hasRightOrigin = true
	}
	if !it.hasOrigin && !it.hasRightOrigin {
		isKey, err := r.d.varUint()
		if err != nil {
			return err
		}
		if isKey == 1 {
			name, err := r.d.varString()
			if err != nil {
				return err
			}
			if r.mode == readIntoDoc {
				it.parent = parentRef{kind: parentType, t: r.doc.get(name)}
			} else {
				it.parent = parentRef{kind: parentName, name: name}
			}
		} else {
			pid, err := r.id()
			if err != nil {
				return err
			}
			it.parent = parentRef{kind: parentID, id: pid}
		}
		if info&infoParentSub != 0 {
			if it.parentSub, err = r.d.varString(); err != nil {
				return err
			}
			it.hasParentSub = true
		}
	}
	c, err := r.content(info & infoRefMask)
	if err != nil {
		return err
	}
	it.content = c
	it.length = c.length()
	it.countable = c.countable()
	return nil
}

func (r *reader) id() (ID, error) {
	client, err := r.d.varUint()
	if err != nil {
		return ID{}, err
	}
	clock, err := r.d.varUint()
	if err != nil {
		return ID{}, err
	}
	return ID{client, clock}, r.lim.clock(clock)
}

func (r *reader) content(ref byte) (content, error) {
	d := &r.d
	switch ref {
	case refDeleted:
		n, err := d.varUint()
		if err != nil {
			return nil, err
		}
		return &contentDeleted{n}, r.lim.clock(n)
	case refJSON:
		n, err := d.varUint()
		if err != nil {
			return nil, err
		}
		if n > uint64(d.remaining()) {
			return nil, errEOF
		}
		arr := make([]any, 0, n)
		for range n {
			s, err := d.varString()
			if err != nil {
				return nil, err
			}
			if s == "undefined" {
				arr = append(arr, undefinedValue{})
				continue
			}
			v, err := parseJSON(s)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		return &contentJSON{arr}, nil
	case refBinary:
		b, err := d.varBytes()
		if err != nil {
			return nil, err
		}
		return &contentBinary{append([]byte(nil), b...)}, nil
	case refString:
		s, err := d.varUTF16()
		if err != nil {
			return nil, err
		}
		return &contentString{s}, nil
	case refEmbed:
		s, err := d.varString()
		if err != nil {
			return nil, err
		}
		v, err := parseJSON(s)
		if err != nil {
			return nil, err
		}
		return &contentEmbed{v}, nil
	case refFormat:
		k, err := d.varString()
		if err != nil {
			return nil, err
		}
		s, err := d.varString()
		if err != nil {
			return nil, err
		}
		v, err := parseJSON(s)
		if err != nil {
			return nil, err
		}
		return &contentFormat{k, v}, nil
	case refType:
		tr, err := d.varUint()
		if err != nil {
			return nil, err
		}
		t := &ytype{}
		switch tr {
		case typeArray, typeMap, typeText, typeXMLFragment, typeXMLText:
		case typeXMLElement, typeXMLHook:
			if t.name, err = d.varString(); err != nil {
				return nil, err
			}
		default:
			return nil, errUnknownType
		}
		t.ref = int(tr)
		return &contentType{t}, nil
	case refAny:
		n, err := d.varUint()
		if err != nil {
			return nil, err
		}
		if n > uint64(d.remaining()) {
			return nil, errEOF
		}
		arr := make([]any, 0, n)
		for range n {
			v, err := d.readAny(0)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		return &contentAny{arr}, nil
	case refDoc:
		guid, err := d.varString()
		if err != nil {
			return nil, err
		}
		raw, err := d.readAny(0)
		if err != nil {
			return nil, err
		}
		return subdocContent(guid, raw)
	}
	return nil, errUnknownContent
}

// subdocContent is what the reference keeps of a subdocument: it builds a
// document from the guid and the decoded options, then keeps only
// gc: false, autoLoad: true and meta, from that document's settings.
func subdocContent(guid string, raw any) (content, error) {
	var own *canonjson.Object
	switch o := raw.(type) {
	case *canonjson.Object:
		own = o
	case *poisonedObject:
		own = o.o
	}
	get := func(k string) (any, bool) {
		if own == nil {
			return nil, false
		}
		v, ok := own.Get(k)
		if _, undef := v.(undefinedValue); undef {
			return nil, false
		}
		return v, ok
	}
	if own != nil && own.Has("guid") {
		g, ok := own.Get("guid")
		s, isString := g.(string)
		if !ok || !isString {
			return nil, errSubdocGUID
		}
		guid = s
	}
	opts := canonjson.NewObject(3)
	if gc, ok := get("gc"); ok && !truthy(gc) {
		opts.Set("gc", false)
	}
	if al, ok := get("autoLoad"); ok && truthy(al) {
		opts.Set("autoLoad", true)
	}
	if meta, ok := get("meta"); ok && meta != nil {
		opts.Set("meta", meta)
	}
	return &contentDoc{guid: guid, opts: opts}, nil
}

// truthy is JavaScript's ToBoolean.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, undefinedValue:
		return false
	case bool:
		return x
	case float64:
		return x == x && x != 0
	case bigInt:
		return x != 0
	case string:
		return x != ""
	}
	return true
}

package yjs

import (
	"errors"
)

var errNoParent = errors.New("yjs: struct without a parent cannot be encoded")

// writeStruct writes a struct in the v1 form.
func (e *encoder) writeStruct(b *block) error {
	switch b.kind {
	case kindGC:
		e.byte(refGC)
		e.varUint(b.length)
		return nil
	case kindSkip:
		e.byte(refSkip)
		e.varUint(b.length)
		return nil
	}
	info := b.content.ref()
	if b.hasOrigin {
		info |= infoOrigin
	}
	if b.hasRightOrigin {
		info |= infoRightOrigin
	}
	if b.hasParentSub {
		info |= infoParentSub
	}
	e.byte(info)
	if b.hasOrigin {
		e.varUint(b.origin.Client)
		e.varUint(b.origin.Clock)
	}
	if b.hasRightOrigin {
		e.varUint(b.rightOrigin.Client)
		e.varUint(b.rightOrigin.Clock)
	}
	if !b.hasOrigin && !b.hasRightOrigin {
		switch p := b.parent; {
		case p.kind == parentType && p.t.item == nil:
			e.varUint(1)
			e.varString(p.t.rootName)
		case p.kind == parentType:
			e.varUint(0)
			e.varUint(p.t.item.id.Client)
			e.varUint(p.t.item.id.Clock)
		case p.kind == parentName:
			e.varUint(1)
			e.varString(p.name)
		case p.kind == parentID:
			e.varUint(0)
			e.varUint(p.id.Client)
			e.varUint(p.id.Clock)
		default:
			return errNoParent
		}
		if b.hasParentSub {
			e.varString(b.parentSub)
		}
	}
	return e.writeContent(b.content)
}

func (e *encoder) writeContent(c content) error {
	switch x := c.(type) {
	case *contentDeleted:
		e.varUint(x.n)
	case *contentJSON:
		e.varUint(uint64(len(x.arr)))
		for _, v := range x.arr {
			if _, undef := v.(undefinedValue); undef {
				e.varString("undefined")
			} else {
				e.varString(stringifyJSON(v))
			}
		}
	case *contentBinary:
		e.varBytes(x.b)
	case *contentString:
		e.varString(stringOf(x.s))
	case *contentEmbed:
		e.varString(stringifyJSON(x.v))
	case *contentFormat:
		e.varString(x.key)
		e.varString(stringifyJSON(x.v))
	case *contentType:
		e.varUint(uint64(x.t.ref))
		if x.t.ref == typeXMLElement || x.t.ref == typeXMLHook {
			e.varString(x.t.name)
		}
	case *contentAny:
		e.varUint(uint64(len(x.arr)))
		for _, v := range x.arr {
			if err := e.writeAny(v); err != nil {
				return err
			}
		}
	case *contentDoc:
		e.varString(x.guid)
		return e.writeAny(x.opts)
	}
	return nil
}

// writeBlocks writes the struct section.
func (e *encoder) writeBlocks(blocks []clientBlock) error {
	e.varUint(uint64(len(blocks)))
	for _, b := range blocks {
		e.varUint(uint64(len(b.structs)))
		e.varUint(b.client)
		e.varUint(b.clock)
		for _, s := range b.structs {
			if err := e.writeStruct(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodeState is the reference's encodeStateAsUpdate in the v1 encoding:
// every struct of the store, highest client first, the store's delete
// set, and (merged in) whatever is pending.
func (d *doc) encodeState(sizeHint int) ([]byte, error) {
	e := encoder{buf: make([]byte, 0, sizeHint)}
	clients := sortedClientsDesc(d.order)
	blocks := make([]clientBlock, 0, len(clients))
	for _, c := range clients {
		l := d.store[c]
		blocks = append(blocks, clientBlock{client: c, clock: l.s[0].id.Clock, structs: l.s})
	}
	if err := e.writeBlocks(blocks); err != nil {
		return nil, err
	}
	e.deleteSet(d.structsDeleteSet())
	if d.pending == nil && d.pendingDS == nil {
		return e.buf, nil
	}
	// The reference merges the pending parts in with mergeUpdates, which
	// decodes the state it just wrote again (lazily), so do the same.
	main, err := readUpdate(e.buf, nil, readLazy, d.lim)
	if err != nil {
		return nil, err
	}
	streams := [][]clientBlock{main.blocks}
	dss := []deleteSet{toDeleteSet(main.ds)}
	if d.pendingDS != nil {
		streams = append(streams, nil)
		dss = append(dss, toDeleteSet(d.pendingDS))
	}
	if d.pending != nil {
		streams = append(streams, diffAll(d.pending.blocks))
		dss = append(dss, newDeleteSet())
	}
	merged, err := mergeUpdates(streams, d.lim)
	if err != nil {
		return nil, err
	}
	out := encoder{buf: make([]byte, 0, len(e.buf)+64)}
	if err := out.writeBlocks(merged); err != nil {
		return nil, err
	}
	out.deleteSet(mergeDeleteSets(dss))
	return out.buf, nil
}

package yjs

import (
	"slices"

	"github.com/syncd-dev/syncd/domain/canonjson"
)

// update is a decoded update: client runs of structs and a delete set.
type update struct {
	blocks []clientBlock
	ds     []dsClient
}

// readUpdate decodes a v1 update; what follows the delete set is ignored,
// as the reference ignores it.
func readUpdate(b []byte, d *doc, mode readMode, lim *budget) (update, error) {
	if len(b) > lim.lim.MaxUpdateBytes {
		return update{}, errTooLarge
	}
	r := &reader{d: decoder{buf: b}, doc: d, mode: mode, lim: lim}
	blocks, err := r.structBlocks()
	if err != nil {
		return update{}, err
	}
	ds, err := r.deleteSetSection()
	if err != nil {
		return update{}, err
	}
	return update{blocks: blocks, ds: ds}, nil
}

type refList struct {
	i    int
	refs []*block
}

// applyUpdate applies a decoded update in one remote transaction:
// integrate what can be, keep the rest pending, apply the delete set,
// and retry pending structs whose dependencies arrived.
func (d *doc) applyUpdate(u update) error {
	return d.transact(false, func(t *transaction) error {
		t.local = false
		refs := map[uint64]*refList{}
		for _, b := range u.blocks {
			// A client listed twice keeps its last run, as in the reference.
			refs[b.client] = &refList{refs: b.structs}
		}
		rest, err := d.integrateStructs(t, refs)
		if err != nil {
			return err
		}
		retry := false
		if p := d.pending; p != nil {
			for client, clock := range p.missing {
				if clock < d.state(client) {
					retry = true
					break
				}
			}
			if rest != nil {
				for client, clock := range rest.missing {
					if m, ok := p.missing[client]; !ok || m > clock {
						p.missing[client] = clock
					}
				}
				p.blocks, err = mergeUpdates([][]clientBlock{p.blocks, rest.blocks}, d.lim)
				if err != nil {
					return err
				}
			}
		} else {
			d.pending = rest
		}
		dsRest, err := d.applyDeleteSet(t, u.ds)
		if err != nil {
			return err
		}
		if d.pendingDS != nil {
			dsRest2, err := d.applyDeleteSet(t, d.pendingDS)
			if err != nil {
				return err
			}
			switch {
			case dsRest != nil && dsRest2 != nil:
				merged := mergeDeleteSets([]deleteSet{toDeleteSet(dsRest), toDeleteSet(dsRest2)})
				if d.pendingDS, err = v2RoundTrip(merged); err != nil {
					return err
				}
			case dsRest != nil:
				d.pendingDS = dsRest
			default:
				d.pendingDS = dsRest2
			}
		} else {
			d.pendingDS = dsRest
		}
		if retry {
			blocks := d.pending.blocks
			d.pending = nil
			u, err := d.decodeBlocks(blocks)
			if err != nil {
				return err
			}
			return d.applyUpdate(u)
		}
		return nil
	})
}

// decodeBlocks turns kept (lazy) structs back into fresh document structs,
// as the reference does when it decodes its pending update again.
func (d *doc) decodeBlocks(blocks []clientBlock) (update, error) {
	out := make([]clientBlock, 0, len(blocks))
	for _, b := range blocks {
		nb := clientBlock{client: b.client, clock: b.clock, structs: make([]*block, 0, len(b.structs))}
		clock := b.clock
		for _, s := range b.structs {
			if err := d.lim.addStruct(); err != nil {
				return update{}, err
			}
			c := &block{kind: s.kind, id: ID{b.client, clock}, length: s.length}
			if s.kind == kindItem {
				c.origin, c.hasOrigin = s.origin, s.hasOrigin
				c.rightOrigin, c.hasRightOrigin = s.rightOrigin, s.hasRightOrigin
				c.parentSub, c.hasParentSub = s.parentSub, s.hasParentSub
				switch s.parent.kind {
				case parentName:
					c.parent = parentRef{kind: parentType, t: d.get(s.parent.name)}
				case parentID:
					c.parent = s.parent
				}
				c.content = s.content.clone()
				c.length = c.content.length()
				c.countable = c.content.countable()
			}
			clock += c.length
			nb.structs = append(nb.structs, c)
		}
		out = append(out, nb)
	}
	return update{blocks: out}, nil
}

func (d *doc) integrateStructs(t *transaction, refs map[uint64]*refList) (*pendingStructs, error) {
	ids := make([]uint64, 0, len(refs))
	for c := range refs {
		ids = append(ids, c)
	}
	slices.Sort(ids)
	next := func() *refList {
		for len(ids) > 0 {
			r := refs[ids[len(ids)-1]]
			if r != nil && r.i < len(r.refs) {
				return r
			}
			ids = ids[:len(ids)-1]
		}
		return nil
	}
	cur := next()
	if cur == nil {
		return nil, nil
	}
	rest := map[uint64][]*block{}
	var restOrder []uint64
	setRest := func(c uint64, s []*block) {
		if _, ok := rest[c]; !ok {
			restOrder = append(restOrder, c)
		}
		rest[c] = s
	}
	missingSV := map[uint64]uint64{}
	updateMissing := func(client, clock uint64) {
		if m, ok := missingSV[client]; !ok || m > clock {
			missingSV[client] = clock
		}
	}
	var stack []*block
	addStackToRest := func() {
		for _, it := range stack {
			c := it.id.Client
			if r, ok := refs[c]; ok {
				// The run resumes at the struct that could not be applied.
				r.i--
				setRest(c, r.refs[r.i:])
				delete(refs, c)
				r.i, r.refs = 0, nil
			} else {
				setRest(c, []*block{it})
			}
			ids = slices.DeleteFunc(ids, func(x uint64) bool { return x == c })
		}
		stack = stack[:0]
	}
	head := cur.refs[cur.i]
	cur.i++
	state := map[uint64]uint64{}
	for {
		if err := d.lim.step(1); err != nil {
			return nil, err
		}
		if head.kind != kindSkip {
			c := head.id.Client
			local, ok := state[c]
			if !ok {
				local = d.state(c)
				state[c] = local
			}
			if local < head.id.Clock {
				// A struct of the same client is missing.
				stack = append(stack, head)
				updateMissing(c, head.id.Clock-1)
				addStackToRest()
			} else {
				offset := local - head.id.Clock
				missing, isMissing, err := d.getMissing(t, head)
				if err != nil {
					return nil, err
				}
				switch {
				case isMissing:
					stack = append(stack, head)
					r := refs[missing]
					if r == nil || r.i == len(r.refs) {
						updateMissing(missing, d.state(missing))
						addStackToRest()
					} else {
						head = r.refs[r.i]
						r.i++
						continue
					}
				case offset == 0 || offset < head.length:
					if err := d.integrate(t, head, offset); err != nil {
						return nil, err
					}
					state[c] = head.id.Clock + head.length
				}
			}
		}
		switch {
		case len(stack) > 0:
			head = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
		case cur != nil && cur.i < len(cur.refs):
			head = cur.refs[cur.i]
			cur.i++
		default:
			cur = next()
			if cur == nil {
				if len(restOrder) == 0 {
					return nil, nil
				}
				return d.keepPending(restOrder, rest, missingSV)
			}
			head = cur.refs[cur.i]
			cur.i++
		}
	}
}

// keepPending writes structs that could not be applied the way the
// reference writes its pending update: client runs highest client first,
// each from its first struct, in the form decoding would give back.
func (d *doc) keepPending(order []uint64, rest map[uint64][]*block, missing map[uint64]uint64) (*pendingStructs, error) {
	blocks := make([]clientBlock, 0, len(order))
	for _, c := range sortedClientsDesc(order) {
		structs := rest[c]
		b := clientBlock{client: c, clock: structs[0].id.Clock, structs: make([]*block, 0, len(structs))}
		for _, s := range structs {
			ls, err := lazyOf(s)
			if err != nil {
				return nil, err
			}
			b.structs = append(b.structs, ls)
		}
		blocks = append(blocks, b)
	}
	return &pendingStructs{missing: missing, blocks: blocks}, nil
}

// lazyOf is a not-yet-integrated document struct as an update holds it
// after the reference's v2 round trip: the parent by key or id, format
// and embed values normalized through the Any encoding.
func lazyOf(s *block) (*block, error) {
	out := &block{kind: s.kind, id: s.id, length: s.length}
	if s.kind != kindItem {
		return out, nil
	}
	out.origin, out.hasOrigin = s.origin, s.hasOrigin
	out.rightOrigin, out.hasRightOrigin = s.rightOrigin, s.hasRightOrigin
	out.parentSub, out.hasParentSub = s.parentSub, s.hasParentSub
	if !s.hasOrigin && !s.hasRightOrigin {
		switch s.parent.kind {
		case parentType:
			out.parent = parentRef{kind: parentName, name: s.parent.t.rootName}
		case parentID:
			out.parent = s.parent
		}
	}
	c, err := pendingContent(s.content)
	if err != nil {
		return nil, err
	}
	out.content = c
	return out, nil
}

func pendingContent(c content) (content, error) {
	switch x := c.(type) {
	case *contentEmbed:
		return &contentEmbed{throughAny(x.v)}, nil
	case *contentFormat:
		return &contentFormat{x.key, throughAny(x.v)}, nil
	case *contentAny:
		// The v2 write fails where the v1 one would (see poisonedObject).
		for _, v := range x.arr {
			if poisoned(v) {
				return nil, errPoisoned
			}
		}
	case *contentDoc:
		if poisoned(x.opts) {
			return nil, errPoisoned
		}
	}
	return c.clone(), nil
}

// poisoned reports whether v holds a value writeAny refuses.
func poisoned(v any) bool {
	switch x := v.(type) {
	case *poisonedObject:
		return true
	case []any:
		for _, el := range x {
			if poisoned(el) {
				return true
			}
		}
	case *canonjson.Object:
		for _, k := range x.Keys() {
			if el, _ := x.Get(k); poisoned(el) {
				return true
			}
		}
	}
	return false
}

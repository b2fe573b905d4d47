package yjs

import (
	"errors"
	"sort"
)

// The document model: the part of a Yjs document that applying updates and
// re-encoding the state depends on. It follows the reference's algorithm
// step for step, because the merged bytes depend on its incidental
// choices too: which structs it splits and later merges back, which
// deleted content it garbage-collects into GC runs, which concurrent
// inserts end up adjacent, and what it keeps pending.

var (
	errMissingStruct = errors.New("yjs: update refers to a struct that does not exist")
	errNotContiguous = errors.New("yjs: struct does not follow its client's last struct")
	errGCLive        = errors.New("yjs: garbage collection of live content")
	errIntegrateGC   = errors.New("yjs: insertion after a garbage-collected struct")
)

// structList is one client's structs in clock order (shared so that
// splits and merges are seen by every holder, as the reference's arrays).
type structList struct{ s []*block }

func (l *structList) insert(i int, b *block) {
	l.s = append(l.s, nil)
	copy(l.s[i+1:], l.s[i:])
	l.s[i] = b
}

// pendingStructs are structs that wait for structs of other clients, and
// the lowest clock each missing client must reach.
type pendingStructs struct {
	missing map[uint64]uint64
	blocks  []clientBlock
}

type doc struct {
	share     map[string]*ytype
	store     map[uint64]*structList
	order     []uint64 // clients in the order their first struct arrived
	pending   *pendingStructs
	pendingDS []dsClient // as the reference's v2 encoding would give it back
	txn       *transaction
	cleanups  []*transaction
	lim       *budget
}

func newDoc(lim *budget) *doc {
	return &doc{share: map[string]*ytype{}, store: map[uint64]*structList{}, lim: lim}
}

// get is the document's top-level type of that key, created on first use.
func (d *doc) get(name string) *ytype {
	t := d.share[name]
	if t == nil {
		t = &ytype{ref: typeRoot, rootName: name}
		d.share[name] = t
	}
	return t
}

func (d *doc) state(client uint64) uint64 {
	l := d.store[client]
	if l == nil || len(l.s) == 0 {
		return 0
	}
	return l.s[len(l.s)-1].end()
}

func (d *doc) stateVector() []clientClock {
	out := make([]clientClock, 0, len(d.order))
	for _, c := range d.order {
		out = append(out, clientClock{c, d.state(c)})
	}
	return out
}

type clientClock struct{ client, clock uint64 }

func isDeleted(b *block) bool { return b.kind != kindItem || b.deleted }

// findIndex finds the struct holding clock in a contiguous list. Like the
// reference it first tries the last struct and then the position the
// clock's share of the list's range suggests (clocks are dense), before
// bisecting.
func findIndex(l *structList, clock uint64) (int, error) {
	if l == nil || len(l.s) == 0 {
		return 0, errMissingStruct
	}
	lo, hi := 0, len(l.s)-1
	last := l.s[hi]
	if last.id.Clock <= clock {
		if clock < last.end() {
			return hi, nil
		}
		return 0, errMissingStruct
	}
	mid := int(float64(clock) / float64(last.end()-1) * float64(hi))
	for lo <= hi {
		s := l.s[mid]
		if s.id.Clock <= clock {
			if clock < s.end() {
				return mid, nil
			}
			lo = mid + 1
		} else {
			hi = mid - 1
		}
		mid = (lo + hi) / 2
	}
	return 0, errMissingStruct
}

func (d *doc) getItem(id ID) (*block, error) {
	l := d.store[id.Client]
	i, err := findIndex(l, id.Clock)
	if err != nil {
		return nil, err
	}
	return l.s[i], nil
}

func (d *doc) addStruct(b *block) error {
	l := d.store[b.id.Client]
	if l == nil {
		l = &structList{}
		d.store[b.id.Client] = l
		d.order = append(d.order, b.id.Client)
	} else if l.s[len(l.s)-1].end() != b.id.Clock {
		return errNotContiguous
	}
	l.s = append(l.s, b)
	return nil
}

func (d *doc) replaceStruct(old, b *block) error {
	l := d.store[old.id.Client]
	i, err := findIndex(l, old.id.Clock)
	if err != nil {
		return err
	}
	l.s[i] = b
	return nil
}

// splitItem splits left at diff and returns the right part, which the
// transaction tries to merge back when it ends.
func (d *doc) splitItem(t *transaction, left *block, diff uint64) (*block, error) {
	if err := d.lim.step(1); err != nil {
		return nil, err
	}
	c := left.content.splice(diff)
	r := &block{
		kind: kindItem, id: ID{left.id.Client, left.id.Clock + diff},
		left: left, origin: ID{left.id.Client, left.id.Clock + diff - 1}, hasOrigin: true,
		right: left.right, rightOrigin: left.rightOrigin, hasRightOrigin: left.hasRightOrigin,
		parent: left.parent, parentSub: left.parentSub, hasParentSub: left.hasParentSub,
		content: c, length: c.length(), countable: c.countable(), deleted: left.deleted,
	}
	left.right = r
	if r.right != nil {
		r.right.left = r
	}
	t.mergeStructs = append(t.mergeStructs, r)
	if r.hasParentSub && r.right == nil {
		r.parent.t.mapSet(r.parentSub, r)
	}
	left.length = diff
	return r, nil
}

func (d *doc) getItemCleanEnd(t *transaction, id ID) (*block, error) {
	l := d.store[id.Client]
	i, err := findIndex(l, id.Clock)
	if err != nil {
		return nil, err
	}
	s := l.s[i]
	if id.Clock != s.end()-1 && s.kind != kindGC {
		r, err := d.splitItem(t, s, id.Clock-s.id.Clock+1)
		if err != nil {
			return nil, err
		}
		l.insert(i+1, r)
	}
	return s, nil
}

func (d *doc) findIndexCleanStart(t *transaction, l *structList, clock uint64) (int, error) {
	i, err := findIndex(l, clock)
	if err != nil {
		return 0, err
	}
	s := l.s[i]
	if s.id.Clock < clock && s.kind == kindItem {
		r, err := d.splitItem(t, s, clock-s.id.Clock)
		if err != nil {
			return 0, err
		}
		l.insert(i+1, r)
		return i + 1, nil
	}
	return i, nil
}

func (d *doc) getItemCleanStart(t *transaction, id ID) (*block, error) {
	l := d.store[id.Client]
	i, err := d.findIndexCleanStart(t, l, id.Clock)
	if err != nil {
		return nil, err
	}
	return l.s[i], nil
}

// iterateStructs calls f for every struct overlapping [start, start+n),
// splitting at both ends first.
func (d *doc) iterateStructs(t *transaction, l *structList, start, n uint64, f func(*block) error) error {
	if n == 0 {
		return nil
	}
	end := start + n
	i, err := d.findIndexCleanStart(t, l, start)
	if err != nil {
		return err
	}
	for {
		if err := d.lim.step(1); err != nil {
			return err
		}
		s := l.s[i]
		i++
		if end < s.end() {
			if _, err := d.findIndexCleanStart(t, l, end); err != nil {
				return err
			}
		}
		if err := f(s); err != nil {
			return err
		}
		if i >= len(l.s) || l.s[i].id.Clock >= end {
			return nil
		}
	}
}

func sameOptID(ha bool, a ID, hb bool, b ID) bool {
	if !ha || !hb {
		return ha == hb
	}
	return a == b
}

// getMissing names a client whose structs the item needs and the store
// lacks; otherwise it resolves the item's neighbours and parent.
func (d *doc) getMissing(t *transaction, it *block) (uint64, bool, error) {
	if it.kind != kindItem {
		return 0, false, nil
	}
	if it.hasOrigin && it.origin.Client != it.id.Client && it.origin.Clock >= d.state(it.origin.Client) {
		return it.origin.Client, true, nil
	}
	if it.hasRightOrigin && it.rightOrigin.Client != it.id.Client && it.rightOrigin.Clock >= d.state(it.rightOrigin.Client) {
		return it.rightOrigin.Client, true, nil
	}
	if it.parent.kind == parentID && it.id.Client != it.parent.id.Client && it.parent.id.Clock >= d.state(it.parent.id.Client) {
		return it.parent.id.Client, true, nil
	}
	if it.hasOrigin {
		left, err := d.getItemCleanEnd(t, it.origin)
		if err != nil {
			return 0, false, err
		}
		it.left = left
		if left.kind == kindItem {
			it.origin = left.lastID()
		}
	}
	if it.hasRightOrigin {
		right, err := d.getItemCleanStart(t, it.rightOrigin)
		if err != nil {
			return 0, false, err
		}
		it.right = right
		it.rightOrigin = right.id
	}
	switch {
	case (it.left != nil && it.left.kind == kindGC) || (it.right != nil && it.right.kind == kindGC):
		it.parent = parentRef{}
	case it.parent.kind == parentNone:
		if it.left != nil && it.left.kind == kindItem {
			it.parent, it.parentSub, it.hasParentSub = it.left.parent, it.left.parentSub, it.left.hasParentSub
		} else if it.right != nil && it.right.kind == kindItem {
			it.parent, it.parentSub, it.hasParentSub = it.right.parent, it.right.parentSub, it.right.hasParentSub
		}
	case it.parent.kind == parentID:
		p, err := d.getItem(it.parent.id)
		if err != nil {
			return 0, false, err
		}
		it.parent = parentRef{}
		if p.kind == kindItem {
			if ct, ok := p.content.(*contentType); ok {
				it.parent = parentRef{kind: parentType, t: ct.t}
			}
		}
	}
	return 0, false, nil
}

// integrate places a struct (offset ticks of it already known) into the
// document: YATA's conflict resolution among concurrent inserts, then the
// list and map links.
func (d *doc) integrate(t *transaction, it *block, offset uint64) error {
	if it.kind == kindGC {
		it.id.Clock += offset
		it.length -= offset
		return d.addStruct(it)
	}
	if offset > 0 {
		it.id.Clock += offset
		left, err := d.getItemCleanEnd(t, ID{it.id.Client, it.id.Clock - 1})
		if err != nil {
			return err
		}
		it.left = left
		if left.kind == kindItem {
			it.origin, it.hasOrigin = left.lastID(), true
		}
		it.content = it.content.splice(offset)
		it.length -= offset
	}
	if it.parent.kind != parentType {
		// No parent (it lies next to collected content): a GC run instead.
		return d.addStruct(&block{kind: kindGC, id: it.id, length: it.length, deleted: true})
	}
	p := it.parent.t
	if it.left != nil && it.left.kind == kindGC {
		// The reference fails here (it walks the GC run as an item).
		return errIntegrateGC
	}
	if (it.left == nil && (it.right == nil || it.right.left != nil)) || (it.left != nil && it.left.right != it.right) {
		left := it.left
		var o *block
		switch {
		case left != nil:
			o = left.right
		case it.hasParentSub:
			o = p.mapGet(it.parentSub)
			for o != nil && o.left != nil {
				o = o.left
			}
		default:
			o = p.start
		}
		var conflicting, before map[*block]struct{}
		for o != nil && o != it.right {
			if err := d.lim.step(1); err != nil {
				return err
			}
			if before == nil {
				conflicting, before = map[*block]struct{}{}, map[*block]struct{}{}
			}
			before[o] = struct{}{}
			conflicting[o] = struct{}{}
			if sameOptID(it.hasOrigin, it.origin, o.hasOrigin, o.origin) {
				if o.id.Client < it.id.Client {
					left = o
					clear(conflicting)
				} else if sameOptID(it.hasRightOrigin, it.rightOrigin, o.hasRightOrigin, o.rightOrigin) {
					break
				}
			} else if o.hasOrigin {
				oo, err := d.getItem(o.origin)
				if err != nil {
					return err
				}
				if _, ok := before[oo]; !ok {
					break
				}
				if _, ok := conflicting[oo]; !ok {
					left = o
					clear(conflicting)
				}
			} else {
				break
			}
			o = o.right
		}
		it.left = left
	}
	if it.left != nil {
		it.right = it.left.right
		it.left.right = it
	} else {
		var r *block
		if it.hasParentSub {
			r = p.mapGet(it.parentSub)
			for r != nil && r.left != nil {
				r = r.left
			}
		} else {
			r = p.start
			p.start = it
		}
		it.right = r
	}
	if it.right != nil {
		it.right.left = it
	} else if it.hasParentSub {
		p.mapSet(it.parentSub, it)
		if it.left != nil {
			// The previous value of the key is overwritten.
			if err := d.deleteItem(t, it.left); err != nil {
				return err
			}
		}
	}
	if err := d.addStruct(it); err != nil {
		return err
	}
	switch c := it.content.(type) {
	case *contentType:
		c.t.item = it
		c.t.depth = p.depth + 1
		if c.t.depth > d.lim.lim.MaxTypeDepth {
			return errTypeDepth
		}
	case *contentFormat:
		p.hasFormatting = true
	case *contentDeleted:
		t.ds.add(it.id.Client, it.id.Clock, c.n)
		it.deleted = true
	}
	t.changedType(p)
	if (p.item != nil && p.item.deleted) || (it.hasParentSub && it.right != nil) {
		return d.deleteItem(t, it)
	}
	return nil
}

// deleteItem marks an item deleted; deleting a type deletes its content.
func (d *doc) deleteItem(t *transaction, it *block) error {
	if it.deleted {
		return nil
	}
	if err := d.lim.step(1); err != nil {
		return err
	}
	it.deleted = true
	t.ds.add(it.id.Client, it.id.Clock, it.length)
	t.changedType(it.parent.t)
	ct, ok := it.content.(*contentType)
	if !ok {
		return nil
	}
	ty := ct.t
	visit := func(c *block) error {
		if !c.deleted {
			return d.deleteItem(t, c)
		}
		if c.id.Clock < t.before[c.id.Client] {
			// Deleted earlier: collected now, so worth merging afterwards.
			t.mergeStructs = append(t.mergeStructs, c)
		}
		return nil
	}
	for c := ty.start; c != nil; c = c.right {
		if err := visit(c); err != nil {
			return err
		}
	}
	for _, k := range ty.mapKeys {
		if err := visit(ty.mapVals[k]); err != nil {
			return err
		}
	}
	delete(t.changed, ty)
	return nil
}

// gcItem drops a deleted item's content: a run of ContentDeleted, or a
// GC run when its parent goes too. A type's whole content goes as GC.
func (d *doc) gcItem(it *block, parentGCd bool) error {
	if !it.deleted {
		return errGCLive
	}
	if err := d.lim.step(1); err != nil {
		return err
	}
	if ct, ok := it.content.(*contentType); ok {
		ty := ct.t
		for c := ty.start; c != nil; c = c.right {
			if err := d.gcItem(c, true); err != nil {
				return err
			}
		}
		ty.start = nil
		for _, k := range ty.mapKeys {
			for c := ty.mapVals[k]; c != nil; c = c.left {
				if err := d.gcItem(c, true); err != nil {
					return err
				}
			}
		}
		ty.mapKeys, ty.mapVals = nil, nil
	}
	if parentGCd {
		return d.replaceStruct(it, &block{kind: kindGC, id: it.id, length: it.length, deleted: true})
	}
	it.content = &contentDeleted{it.length}
	return nil
}

// mergeWith merges right into left when the reference would.
func mergeWith(left, right *block) bool {
	switch left.kind {
	case kindGC, kindSkip:
		if right.kind != left.kind {
			return false
		}
		left.length += right.length
		return true
	}
	if right.kind != kindItem || !right.hasOrigin || right.origin != left.lastID() || left.right != right ||
		!sameOptID(left.hasRightOrigin, left.rightOrigin, right.hasRightOrigin, right.rightOrigin) ||
		left.id.Client != right.id.Client || left.end() != right.id.Clock || left.deleted != right.deleted ||
		left.content.ref() != right.content.ref() || !left.content.mergeWith(right.content) {
		return false
	}
	left.right = right.right
	if left.right != nil {
		left.right.left = left
	}
	left.length += right.length
	return true
}

// tryToMergeWithLefts merges l.s[pos] into its left neighbours while
// possible and returns how many structs went.
func (d *doc) tryToMergeWithLefts(l *structList, pos int) int {
	right := l.s[pos]
	i := pos
	for i > 0 {
		left := l.s[i-1]
		if isDeleted(left) != isDeleted(right) || left.kind != right.kind || !mergeWith(left, right) {
			break
		}
		if right.kind == kindItem && right.hasParentSub && right.parent.t.mapGet(right.parentSub) == right {
			right.parent.t.mapSet(right.parentSub, left)
		}
		right = left
		i--
	}
	merged := pos - i
	if merged > 0 {
		l.s = append(l.s[:pos+1-merged], l.s[pos+1:]...)
	}
	return merged
}

func (d *doc) tryGCDeleteSet(ds *deleteSet) error {
	for _, client := range ds.order {
		l := d.store[client]
		items := ds.m[client]
		for di := len(items) - 1; di >= 0; di-- {
			del := items[di]
			end := del.clock + del.len
			si, err := findIndex(l, del.clock)
			if err != nil {
				return err
			}
			for ; si < len(l.s) && l.s[si].id.Clock < end; si++ {
				if err := d.lim.step(1); err != nil {
					return err
				}
				if s := l.s[si]; s.kind == kindItem && s.deleted {
					if err := d.gcItem(s, false); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func (d *doc) tryMergeDeleteSet(ds *deleteSet) error {
	for _, client := range ds.order {
		l := d.store[client]
		items := ds.m[client]
		for di := len(items) - 1; di >= 0; di-- {
			del := items[di]
			idx, err := findIndex(l, del.clock+del.len-1)
			if err != nil {
				return err
			}
			si := min(len(l.s)-1, idx+1)
			for si > 0 && l.s[si].id.Clock >= del.clock {
				if err := d.lim.step(1); err != nil {
					return err
				}
				si -= 1 + d.tryToMergeWithLefts(l, si)
			}
		}
	}
	return nil
}

// transaction collects what one change did, for the end-of-change work:
// garbage collection, merging structs back, the formatting cleanup.
type transaction struct {
	ds           deleteSet
	before       map[uint64]uint64
	after        []clientClock
	changed      map[*ytype]struct{}
	mergeStructs []*block
	local        bool
}

// changedType records that a type changed, when it existed before the
// transaction and is alive (the reference's changed-types map).
func (t *transaction) changedType(ty *ytype) {
	if ty == nil {
		return
	}
	if it := ty.item; it == nil || (it.id.Clock < t.before[it.id.Client] && !it.deleted) {
		t.changed[ty] = struct{}{}
	}
}

// transact runs f in the open transaction or a new one, and runs the
// end-of-transaction work when the outermost one ends.
func (d *doc) transact(local bool, f func(*transaction) error) error {
	initial := d.txn == nil
	if initial {
		before := make(map[uint64]uint64, len(d.order))
		for _, cc := range d.stateVector() {
			before[cc.client] = cc.clock
		}
		d.txn = &transaction{ds: newDeleteSet(), before: before, changed: map[*ytype]struct{}{}, local: local}
		d.cleanups = append(d.cleanups, d.txn)
	}
	if err := f(d.txn); err != nil {
		return err
	}
	if initial {
		first := d.txn == d.cleanups[0]
		d.txn = nil
		if first {
			return d.cleanupTransactions()
		}
	}
	return nil
}

func (d *doc) cleanupTransactions() error {
	for i := 0; i < len(d.cleanups); i++ {
		t := d.cleanups[i]
		t.ds.sortAndMerge()
		t.after = d.stateVector()
		if !t.local && t.needsFormattingCleanup() {
			if err := d.cleanupFormatting(t); err != nil {
				return err
			}
		}
		if err := d.tryGCDeleteSet(&t.ds); err != nil {
			return err
		}
		if err := d.tryMergeDeleteSet(&t.ds); err != nil {
			return err
		}
		for _, cc := range t.after {
			before := t.before[cc.client]
			if before == cc.clock {
				continue
			}
			l := d.store[cc.client]
			first, err := findIndex(l, before)
			if err != nil {
				return err
			}
			for j := len(l.s) - 1; j >= max(first, 1); {
				if err := d.lim.step(1); err != nil {
					return err
				}
				j -= 1 + d.tryToMergeWithLefts(l, j)
			}
		}
		for j := len(t.mergeStructs) - 1; j >= 0; j-- {
			id := t.mergeStructs[j].id
			l := d.store[id.Client]
			pos, err := findIndex(l, id.Clock)
			if err != nil {
				return err
			}
			if pos+1 < len(l.s) && d.tryToMergeWithLefts(l, pos+1) > 1 {
				continue
			}
			if pos > 0 {
				d.tryToMergeWithLefts(l, pos)
			}
		}
	}
	d.cleanups = nil
	return nil
}

// needsFormattingCleanup: a remote change touched a live text type that
// holds formatting (the reference's text observer asks for the cleanup).
func (t *transaction) needsFormattingCleanup() bool {
	for ty := range t.changed {
		if (ty.item == nil || !ty.item.deleted) && ty.isText() && ty.hasFormatting {
			return true
		}
	}
	return false
}

// sortedClientsDesc lists clients highest first, the order the reference
// writes them in.
func sortedClientsDesc(cs []uint64) []uint64 {
	out := append([]uint64(nil), cs...)
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	return out
}

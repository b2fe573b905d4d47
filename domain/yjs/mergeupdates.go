package yjs

// The reference's structural update merge (mergeUpdates), used for its
// pending structs and to fold them into an encoded state. It never merges
// items (lazily decoded items have no neighbours), only GC runs; it drops
// what another update already covered, slices partial overlaps, and fills
// gaps with Skips.

// lazyReader yields an update's structs in order, as fresh copies with
// the clocks a decoder assigns (each run from its first clock).
type lazyReader struct {
	blocks      []clientBlock
	bi, si      int
	clock       uint64
	filterSkips bool
	curr        *block
}

func newLazyReader(blocks []clientBlock, filterSkips bool) *lazyReader {
	r := &lazyReader{blocks: blocks, filterSkips: filterSkips}
	r.next()
	return r
}

func (r *lazyReader) next() *block {
	for {
		r.curr = r.raw()
		if r.curr == nil || !r.filterSkips || r.curr.kind != kindSkip {
			return r.curr
		}
	}
}

func (r *lazyReader) raw() *block {
	for r.bi < len(r.blocks) {
		b := r.blocks[r.bi]
		if r.si == 0 {
			r.clock = b.clock
		}
		if r.si < len(b.structs) {
			s := b.structs[r.si]
			r.si++
			c := &block{kind: s.kind, id: ID{b.client, r.clock}, length: s.length}
			if s.kind == kindItem {
				*c = *s
				c.id = ID{b.client, r.clock}
				c.left, c.right = nil, nil
				c.content = s.content.clone()
			}
			r.clock += c.length
			return c
		}
		r.bi++
		r.si = 0
	}
	return nil
}

// lazyWriter collects written structs into client runs.
type lazyWriter struct {
	blocks []clientBlock
}

func (w *lazyWriter) write(s *block) {
	if n := len(w.blocks); n > 0 && w.blocks[n-1].client == s.id.Client {
		w.blocks[n-1].structs = append(w.blocks[n-1].structs, s)
		return
	}
	w.blocks = append(w.blocks, clientBlock{client: s.id.Client, clock: s.id.Clock, structs: []*block{s}})
}

// sliceStruct is the part of s from diff on.
func sliceStruct(s *block, diff uint64) *block {
	switch s.kind {
	case kindGC, kindSkip:
		return &block{kind: s.kind, id: ID{s.id.Client, s.id.Clock + diff}, length: s.length - diff}
	}
	c := s.content.splice(diff)
	return &block{
		kind: kindItem, id: ID{s.id.Client, s.id.Clock + diff},
		origin: ID{s.id.Client, s.id.Clock + diff - 1}, hasOrigin: true,
		rightOrigin: s.rightOrigin, hasRightOrigin: s.hasRightOrigin,
		parent: s.parent, parentSub: s.parentSub, hasParentSub: s.hasParentSub,
		content: c, length: c.length(), countable: c.countable(),
	}
}

// lazyMerge merges two lazily decoded structs: only GC runs (and Skips)
// merge; items never do, having no neighbours.
func lazyMerge(left, right *block) bool {
	if left.kind == kindItem || left.kind != right.kind {
		return false
	}
	left.length += right.length
	return true
}

// mergeUpdates merges the struct sections of several updates.
func mergeUpdates(streams [][]clientBlock, lim *budget) ([]clientBlock, error) {
	if len(streams) == 1 {
		return streams[0], nil
	}
	decs := make([]*lazyReader, 0, len(streams))
	for _, s := range streams {
		decs = append(decs, newLazyReader(s, true))
	}
	var w lazyWriter
	var cw *block // the struct being written
	for {
		if err := lim.step(1); err != nil {
			return nil, err
		}
		live := decs[:0]
		for _, d := range decs {
			if d.curr != nil {
				live = append(live, d)
			}
		}
		decs = live
		v8Sort(decs, compareReaders)
		if len(decs) == 0 {
			break
		}
		cd := decs[0]
		firstClient := cd.curr.id.Client
		if cw != nil {
			curr := cd.curr
			iterated := false
			for curr != nil && curr.end() <= cw.end() && curr.id.Client >= cw.id.Client {
				curr = cd.next()
				iterated = true
			}
			if curr == nil || curr.id.Client != firstClient || (iterated && curr.id.Clock > cw.end()) {
				continue
			}
			if firstClient != cw.id.Client {
				w.write(cw)
				cw = curr
				cd.next()
			} else if cw.end() < curr.id.Clock {
				if cw.kind == kindSkip {
					cw.length = curr.end() - cw.id.Clock
				} else {
					w.write(cw)
					cw = &block{kind: kindSkip, id: ID{firstClient, cw.end()}, length: curr.id.Clock - cw.end()}
				}
			} else {
				if diff := cw.end() - curr.id.Clock; diff > 0 {
					if cw.kind == kindSkip {
						cw.length -= diff
					} else {
						curr = sliceStruct(curr, diff)
					}
				}
				if !lazyMerge(cw, curr) {
					w.write(cw)
					cw = curr
					cd.next()
				}
			}
		} else {
			cw = cd.curr
			cd.next()
		}
		for next := cd.curr; next != nil && next.id.Client == firstClient && next.id.Clock == cw.end() && next.kind != kindSkip; next = cd.next() {
			w.write(cw)
			cw = next
		}
	}
	if cw != nil {
		w.write(cw)
	}
	return w.blocks, nil
}

// diffAll is the reference's diffUpdate against an empty state vector:
// every struct except a Skip that opens a client's run.
func diffAll(blocks []clientBlock) []clientBlock {
	r := newLazyReader(blocks, false)
	var w lazyWriter
	for r.curr != nil {
		curr := r.curr
		if curr.kind == kindSkip {
			r.next()
			continue
		}
		client := curr.id.Client
		w.write(curr)
		for r.next(); r.curr != nil && r.curr.id.Client == client; r.next() {
			w.write(r.curr)
		}
	}
	return w.blocks
}

// compareReaders is the reference's order of update readers: higher
// client first, then lower clock. At equal clocks it is inconsistent for
// a GC run against an item (each sorts before the other), so the result
// depends on the sorting algorithm, which v8Sort reproduces.
func compareReaders(x, y *lazyReader) int {
	a, b := x.curr, y.curr
	if a.id.Client == b.id.Client {
		switch {
		case a.id.Clock < b.id.Clock:
			return -1
		case a.id.Clock > b.id.Clock:
			return 1
		case a.kind == b.kind:
			return 0
		case a.kind == kindSkip:
			return 1
		}
		return -1
	}
	if b.id.Client > a.id.Client {
		return 1
	}
	return -1
}

// v8Sort is V8's Array.prototype.sort for arrays shorter than 64 (one run
// found, reversed when strictly descending, extended by binary
// insertion), so an inconsistent comparator orders as it does there.
func v8Sort[T any](a []T, cmp func(x, y T) int) {
	n := len(a)
	if n < 2 {
		return
	}
	run := 2
	desc := cmp(a[1], a[0]) < 0
	for i := 2; i < n; i++ {
		o := cmp(a[i], a[i-1])
		if (desc && o >= 0) || (!desc && o < 0) {
			break
		}
		run++
	}
	if desc {
		for i, j := 0, run-1; i < j; i, j = i+1, j-1 {
			a[i], a[j] = a[j], a[i]
		}
	}
	for start := run; start < n; start++ {
		pivot := a[start]
		left, right := 0, start
		for left < right {
			mid := left + (right-left)/2
			if cmp(pivot, a[mid]) < 0 {
				right = mid
			} else {
				left = mid + 1
			}
		}
		copy(a[left+1:start+1], a[left:start])
		a[left] = pivot
	}
}

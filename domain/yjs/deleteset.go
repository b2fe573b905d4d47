package yjs

import (
	"errors"
	"sort"
)

type deleteItem struct{ clock, len uint64 }

// deleteSet maps clients to deleted ranges, clients in insertion order
// (the reference iterates them so).
type deleteSet struct {
	order []uint64
	m     map[uint64][]deleteItem
}

func newDeleteSet() deleteSet { return deleteSet{m: map[uint64][]deleteItem{}} }

func (ds *deleteSet) add(client, clock, n uint64) {
	if _, ok := ds.m[client]; !ok {
		ds.order = append(ds.order, client)
	}
	ds.m[client] = append(ds.m[client], deleteItem{clock, n})
}

func (ds *deleteSet) empty() bool { return len(ds.order) == 0 }

// sortAndMerge sorts each client's ranges and merges overlapping or
// touching ones.
func (ds *deleteSet) sortAndMerge() {
	for _, c := range ds.order {
		ds.m[c] = sortAndMergeItems(ds.m[c])
	}
}

func sortAndMergeItems(dels []deleteItem) []deleteItem {
	sort.SliceStable(dels, func(i, j int) bool { return dels[i].clock < dels[j].clock })
	if len(dels) == 0 {
		return dels
	}
	j := 1
	for i := 1; i < len(dels); i++ {
		l, r := dels[j-1], dels[i]
		if l.clock+l.len >= r.clock {
			dels[j-1] = deleteItem{l.clock, max(l.len, r.clock+r.len-l.clock)}
		} else {
			dels[j] = r
			j++
		}
	}
	return dels[:j]
}

// dsClient is one client's ranges as an update lists them.
type dsClient struct {
	client uint64
	items  []deleteItem
}

// readDeleteSet reads the delete-set section of a v1 update, clients in
// the order listed (possibly repeated, possibly with no ranges).
func (r *reader) deleteSetSection() ([]dsClient, error) {
	n, err := r.d.varUint()
	if err != nil {
		return nil, err
	}
	if n > uint64(r.d.remaining()) {
		return nil, errEOF
	}
	out := make([]dsClient, 0, n)
	for range n {
		client, err := r.d.varUint()
		if err != nil {
			return nil, err
		}
		k, err := r.d.varUint()
		if err != nil {
			return nil, err
		}
		if k > uint64(r.d.remaining()) {
			return nil, errEOF
		}
		c := dsClient{client: client, items: make([]deleteItem, 0, k)}
		for range k {
			clock, err := r.d.varUint()
			if err != nil {
				return nil, err
			}
			n, err := r.d.varUint()
			if err != nil {
				return nil, err
			}
			if err := r.lim.clock(clock); err != nil {
				return nil, err
			}
			if err := r.lim.clock(n); err != nil {
				return nil, err
			}
			c.items = append(c.items, deleteItem{clock, n})
		}
		out = append(out, c)
	}
	return out, nil
}

// toDeleteSet collects listed ranges per client, as the reference's
// readDeleteSet does (clients without ranges left out).
func toDeleteSet(list []dsClient) deleteSet {
	ds := newDeleteSet()
	for _, c := range list {
		for _, it := range c.items {
			ds.add(c.client, it.clock, it.len)
		}
	}
	return ds
}

// mergeDeleteSets unions delete sets: clients in order of first mention,
// ranges sorted and merged.
func mergeDeleteSets(dss []deleteSet) deleteSet {
	out := newDeleteSet()
	for i, ds := range dss {
		for _, c := range ds.order {
			if _, ok := out.m[c]; ok {
				continue
			}
			dels := append([]deleteItem(nil), ds.m[c]...)
			for _, later := range dss[i+1:] {
				dels = append(dels, later.m[c]...)
			}
			out.order = append(out.order, c)
			out.m[c] = dels
		}
	}
	out.sortAndMerge()
	return out
}

var errEmptyRange = errors.New("yjs: empty delete range cannot be kept pending")

// v2RoundTrip is what a delete set becomes when the reference keeps it
// pending: it writes it in its v2 encoding (clients highest first, clock
// deltas as unsigned varints, lengths minus one) and reads it back. A
// clock below the previous range's end cannot be written as an unsigned
// delta: lib0 writes its low seven bits, so it reads back elsewhere; an
// empty range cannot be written at all.
func v2RoundTrip(ds deleteSet) ([]dsClient, error) {
	out := make([]dsClient, 0, len(ds.order))
	for _, client := range sortedClientsDesc(ds.order) {
		var enc, dec uint64
		items := make([]deleteItem, 0, len(ds.m[client]))
		for _, it := range ds.m[client] {
			diff := it.clock - enc // wraps when it.clock < enc, as two's complement
			if it.clock < enc {
				diff &= 0x7F
			}
			enc = it.clock
			if it.len == 0 {
				return nil, errEmptyRange
			}
			clock := dec + diff
			enc += it.len
			dec = clock + it.len
			items = append(items, deleteItem{clock, it.len})
		}
		out = append(out, dsClient{client, items})
	}
	return out, nil
}

// applyDeleteSet deletes the listed ranges the document holds and returns
// the rest (ranges beyond a client's state), kept pending.
func (d *doc) applyDeleteSet(t *transaction, list []dsClient) ([]dsClient, error) {
	unapplied := newDeleteSet()
	for _, c := range list {
		l := d.store[c.client]
		state := d.state(c.client)
		for _, it := range c.items {
			clock, end := it.clock, it.clock+it.len
			if clock >= state {
				unapplied.add(c.client, clock, end-clock)
				continue
			}
			if state < end {
				unapplied.add(c.client, state, end-state)
			}
			i, err := findIndex(l, clock)
			if err != nil {
				return nil, err
			}
			if s := l.s[i]; !isDeleted(s) && s.id.Clock < clock {
				r, err := d.splitItem(t, s, clock-s.id.Clock)
				if err != nil {
					return nil, err
				}
				l.insert(i+1, r)
				i++
			}
			for i < len(l.s) {
				// Overlapping ranges walk the same structs again: bounded.
				if err := d.lim.step(1); err != nil {
					return nil, err
				}
				s := l.s[i]
				i++
				if s.id.Clock >= end {
					break
				}
				if isDeleted(s) {
					continue
				}
				if end < s.end() {
					r, err := d.splitItem(t, s, end-s.id.Clock)
					if err != nil {
						return nil, err
					}
					l.insert(i, r)
				}
				if err := d.deleteItem(t, s); err != nil {
					return nil, err
				}
			}
		}
	}
	if !unapplied.empty() {
	}
	if unapplied.empty() {
		return nil, nil
	}
	return v2RoundTrip(unapplied)
}

// structsDeleteSet is the delete set of the whole store: every run of
// deleted structs.
func (d *doc) structsDeleteSet() deleteSet {
	ds := newDeleteSet()
	for _, client := range d.order {
		l := d.store[client]
		for i := 0; i < len(l.s); i++ {
			s := l.s[i]
			if !isDeleted(s) {
				continue
			}
			n := s.length
			for i+1 < len(l.s) && isDeleted(l.s[i+1]) {
				i++
				n += l.s[i].length
			}
			ds.add(client, s.id.Clock, n)
		}
	}
	return ds
}

func (e *encoder) deleteSet(ds deleteSet) {
	clients := sortedClientsDesc(ds.order)
	e.varUint(uint64(len(clients)))
	for _, c := range clients {
		items := ds.m[c]
		e.varUint(c)
		e.varUint(uint64(len(items)))
		for _, it := range items {
			e.varUint(it.clock)
			e.varUint(it.len)
		}
	}
}

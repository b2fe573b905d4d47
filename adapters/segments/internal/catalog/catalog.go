// Package catalog is the in-process publication catalog the memory and
// filesystem segment stores share: entries per content address, each with
// its publications, and an index by publication key for reuse lookups.
// It is not safe for concurrent use; its owners lock around it.
package catalog

import (
	"bytes"
	"sort"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/ports"
)

// Entry is one stored segment.
type Entry struct {
	ID   string
	Size int64
	Pubs []ports.SegmentPublication
}

// Catalog holds the entries of one store.
type Catalog struct {
	entries map[string]*Entry
	byKey   map[ports.SegmentKey]map[string]struct{}
}

// New returns an empty catalog.
func New() *Catalog {
	return &Catalog{entries: map[string]*Entry{}, byKey: map[ports.SegmentKey]map[string]struct{}{}}
}

// Check validates a Put: the id must be the content address of b.
func Check(b []byte, p ports.SegmentPublication) error {
	if p.SegmentID != contentaddr.Of(b) {
		return ports.ErrSegmentIDMismatch
	}
	return nil
}

// SameBytes reports a collision as ports.ErrSegmentCollision.
func SameBytes(stored, b []byte) error {
	if !bytes.Equal(stored, b) {
		return ports.ErrSegmentCollision
	}
	return nil
}

// Merge combines an existing publication of the same key with a new one:
// the new descriptor, the earlier creation time and the later expiry.
func Merge(old, p ports.SegmentPublication) ports.SegmentPublication {
	if old.CreatedAtMs != 0 && old.CreatedAtMs < p.CreatedAtMs {
		p.CreatedAtMs = old.CreatedAtMs
	}
	if old.ExpiresAtMs > p.ExpiresAtMs {
		p.ExpiresAtMs = old.ExpiresAtMs
	}
	return p
}

// Entry returns the entry of id, or nil.
func (c *Catalog) Entry(id string) *Entry { return c.entries[id] }

// Add inserts an entry with its publications (loading a persisted store).
func (c *Catalog) Add(e Entry) {
	cp := &Entry{ID: e.ID, Size: e.Size}
	c.entries[e.ID] = cp
	for _, p := range e.Pubs {
		c.Publish(p)
	}
}

// Publish records p on its (existing or new) entry and returns the stored
// publication.
func (c *Catalog) Publish(p ports.SegmentPublication) ports.SegmentPublication {
	e := c.entries[p.SegmentID]
	if e == nil {
		e = &Entry{ID: p.SegmentID, Size: p.ByteLength}
		c.entries[p.SegmentID] = e
	}
	for i, old := range e.Pubs {
		if old.SegmentKey == p.SegmentKey {
			e.Pubs[i] = Merge(old, p)
			return e.Pubs[i]
		}
	}
	e.Pubs = append(e.Pubs, p)
	ids := c.byKey[p.SegmentKey]
	if ids == nil {
		ids = map[string]struct{}{}
		c.byKey[p.SegmentKey] = ids
	}
	ids[p.SegmentID] = struct{}{}
	return p
}

// Find returns the newest unexpired publication under k.
func (c *Catalog) Find(k ports.SegmentKey, nowMs int64) (ports.SegmentPublication, bool) {
	var best ports.SegmentPublication
	found := false
	for id := range c.byKey[k] {
		e := c.entries[id]
		if e == nil {
			continue
		}
		for _, p := range e.Pubs {
			if p.SegmentKey != k || p.Expired(nowMs) {
				continue
			}
			if !found || p.CreatedAtMs > best.CreatedAtMs || (p.CreatedAtMs == best.CreatedAtMs && p.SegmentID > best.SegmentID) {
				best, found = p, true
			}
		}
	}
	return best, found
}

// Publications returns a copy of id's publications, oldest first.
func (c *Catalog) Publications(id string) []ports.SegmentPublication {
	e := c.entries[id]
	if e == nil {
		return nil
	}
	out := append([]ports.SegmentPublication(nil), e.Pubs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAtMs < out[j].CreatedAtMs })
	return out
}

// Sweep removes publications expired at or before beforeMs. It returns
// the number removed, the ids whose publications changed but remain, and
// the ids left without any (already removed from the catalog).
func (c *Catalog) Sweep(beforeMs int64) (removed int64, changed, emptied []string) {
	for id, e := range c.entries {
		kept := e.Pubs[:0]
		n := 0
		for _, p := range e.Pubs {
			if p.ExpiresAtMs <= beforeMs {
				n++
				if ids := c.byKey[p.SegmentKey]; ids != nil {
					delete(ids, id)
					if len(ids) == 0 {
						delete(c.byKey, p.SegmentKey)
					}
				}
				continue
			}
			kept = append(kept, p)
		}
		if n == 0 {
			continue
		}
		removed += int64(n)
		e.Pubs = kept
		if len(kept) == 0 {
			delete(c.entries, id)
			emptied = append(emptied, id)
		} else {
			changed = append(changed, id)
		}
	}
	sort.Strings(changed)
	sort.Strings(emptied)
	return removed, changed, emptied
}

// Stats totals the catalog: entries, their bytes, publications and those
// expired at nowMs.
func (c *Catalog) Stats(nowMs int64) ports.SegmentStats {
	var st ports.SegmentStats
	for _, e := range c.entries {
		st.Segments++
		st.Bytes += e.Size
		for _, p := range e.Pubs {
			st.Publications++
			if p.Expired(nowMs) {
				st.ExpiredPublications++
			}
		}
	}
	return st
}

// Package yjs merges Yjs documents the way the reference `yjs-doc` CRDT
// merger does (SPEC §5.10): apply the stored update, then the incoming
// one, into a fresh document with garbage collection on, and encode the
// whole state as one v1 update. The result is byte-identical to the
// reference's, which clients compare.
//
// No Yjs document model exists in Go here, so the package holds its own:
// the v1 update codec (lib0 primitives, every struct and content kind,
// delete sets), the document's struct store with the YATA integration,
// splitting and merging of structs, deletion and garbage collection,
// pending structs and delete ranges whose dependencies are missing, the
// rich-text formatting cleanup, and the structural update merge the
// reference uses for pending data. Each follows the reference's algorithm
// where the bytes depend on it; bounds (Limits) keep hostile updates from
// costing unbounded memory or time, and every malformed update is an
// error, never a panic.
package yjs

import "errors"

var errInternal = errors.New("yjs: internal error")

// Merge merges incoming into stored (nil or empty: nothing stored) and
// returns the merged state. An update the reference could not apply, or
// one beyond the limits, is an error.
func Merge(stored, incoming []byte, l Limits) (out []byte, err error) {
	// A panic would be a bug here (the fuzz targets call merge, which does
	// not recover); a caller still gets an error, not a crashed push.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, errInternal
		}
	}()
	return merge(stored, incoming, l)
}

func merge(stored, incoming []byte, l Limits) ([]byte, error) {
	lim := newBudget(l)
	d := newDoc(lim)
	for _, u := range [][]byte{stored, incoming} {
		if len(u) == 0 {
			continue
		}
		up, err := readUpdate(u, d, readIntoDoc, lim)
		if err != nil {
			return nil, err
		}
		if err := d.applyUpdate(up); err != nil {
			return nil, err
		}
	}
	return d.encodeState(len(stored) + len(incoming) + 64)
}

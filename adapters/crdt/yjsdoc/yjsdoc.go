// Package yjsdoc is the server's built-in CRDT merger for crdtType
// "yjs-doc" (SPEC §5.10.1): domain/yjs's merge behind ports.CRDTMerger.
// The merged bytes are the reference merger's (apply the stored update,
// then the incoming one, into a fresh Yjs document and encode its state as
// a v1 update), so every client converges on the same bytes. That includes
// the reference's corners: in rare cases (a pending struct re-ordered, a
// formatting cleanup) merging a merged state again changes it, although
// ports.CRDTMerger asks mergers to be idempotent; the same bytes as the
// reference matter more, since clients converge with it.
package yjsdoc

import (
	"github.com/syncd-dev/syncd/domain/yjs"
	"github.com/syncd-dev/syncd/ports"
)

// Type is the crdtType the merger handles.
const Type = "yjs-doc"

// Options configure a Merger.
type Options struct {
	// Limits bound each merge; the zero value is yjs.DefaultLimits.
	Limits yjs.Limits
}

// Merger merges Yjs documents.
type Merger struct{ lim yjs.Limits }

var _ ports.CRDTMerger = (*Merger)(nil)

// New returns a Merger.
func New(o Options) *Merger { return &Merger{lim: o.Limits} }

// Type is "yjs-doc".
func (*Merger) Type() string { return Type }

// Merge merges incoming into stored (nil for an insert). An update the
// reference could not apply, or one beyond the limits, is an error, which
// the push pipeline answers with sync.crdt_merge_failed.
func (m *Merger) Merge(stored, incoming []byte) ([]byte, error) {
	return yjs.Merge(stored, incoming, m.lim)
}

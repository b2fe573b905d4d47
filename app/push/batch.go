package push

import (
	"context"
	"errors"
	"time"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	dompush "github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

// ErrStaleEpoch stops a commit of a batch admitted at a remembered log
// epoch that its transaction found rotated: nothing of the batch
// committed, and its request is to be served again from its head.
var ErrStaleEpoch = errors.New("push: the remembered log epoch is stale")

// Batch is the commits of one sync request as the pipeline sees them:
// who pushes them, at which wire version and under which scopes, what
// the request read before them, and the serve gate reads its read-verify
// needs. A round builds one each time it serves a request and commits
// them in order, from one goroutine.
type Batch struct {
	Identity    ports.Identity
	ClientID    string
	WireVersion uint16
	Schema      *schema.Schema
	// View is the client's schema version in the served window (SPEC
	// §9): its payloads decode with that version's codec and its
	// conflict rows are projected onto it. Nil: the current version.
	View *schema.View
	// Now is the request's time (its reactions are available from it).
	Now time.Time
	// Scopes is the request's one scope resolution.
	Scopes scopes.Resolution
	// Commits are the request's commits, in order.
	Commits []*ssp2.PushCommit
	// Head is the request head when it read the first commit's
	// idempotency record (PushRead): that commit's optimistic lookup
	// takes it from here.
	Head *ports.RequestHead
	// PushOnly: the request pushes and pulls nothing, so its last
	// commit's transaction reads the serve gate right after it commits
	// where the store can (GateAfter).
	PushOnly bool
	// RememberedEpoch, when set, is the log epoch the request was
	// admitted at without reading its head: every transaction checks it
	// under the partition lock until one commits, and one that finds
	// another epoch fails with ErrStaleEpoch before writing.
	RememberedEpoch string

	// gate is the first serve-gate read (gateRead set): the round's entry
	// read, or the first push transaction's; the token base.
	gate     checkpoint.ServeGate
	gateRead bool
	// afterGate is the serve gate read right after the last commit of a
	// push-only batch (nil: not read).
	afterGate *checkpoint.ServeGate
	// epochChecked: a transaction that committed saw RememberedEpoch.
	epochChecked bool
	codecs       map[string]*rowcodec.Codec
	vcodecs      map[string]*rowcodec.Codec // the View's tables
	// plan, for a server-authoritative command, returns the commit's
	// operations inside its push transaction (PushCommand); its client id
	// is the reserved command identity.
	plan func(ctx context.Context, r ports.TxReader) ([]ssp2.PushOperation, error)
}

// NoteGate keeps g as the batch's token base if no serve gate was read
// before it.
func (b *Batch) NoteGate(g checkpoint.ServeGate) {
	if !b.gateRead {
		b.gate, b.gateRead = g, true
	}
}

// Gate returns the token base: the first serve gate noted or read by a
// commit's transaction, and whether there is one.
func (b *Batch) Gate() (checkpoint.ServeGate, bool) { return b.gate, b.gateRead }

// GateAfter returns the serve gate read right after the last commit of a
// push-only batch, and whether it was read.
func (b *Batch) GateAfter() (checkpoint.ServeGate, bool) {
	if b.afterGate == nil {
		return checkpoint.ServeGate{}, false
	}
	return *b.afterGate, true
}

// headless reports whether the batch was admitted without its head.
func (b *Batch) headless() bool { return b.RememberedEpoch != "" }

// checkClientID refuses a client id bound to another actor, and an
// ordinary request's id in the reserved command namespace (§1.5).
func (b *Batch) checkClientID(boundActor string) error {
	if b.plan != nil {
		return dompush.CheckClientID("", b.Identity.ActorID, boundActor, true)
	}
	return dompush.CheckClientID(b.ClientID, b.Identity.ActorID, boundActor, true)
}

func (b *Batch) codec(t *schema.Table) *rowcodec.Codec {
	return cachedCodec(&b.codecs, t)
}

// versionCodec is the codec of the View's form of a table.
func (b *Batch) versionCodec(t *schema.Table) *rowcodec.Codec {
	return cachedCodec(&b.vcodecs, t)
}

func cachedCodec(m *map[string]*rowcodec.Codec, t *schema.Table) *rowcodec.Codec {
	if *m == nil {
		*m = map[string]*rowcodec.Codec{}
	}
	c := (*m)[t.Name]
	if c == nil {
		c = rowcodec.New(t)
		(*m)[t.Name] = c
	}
	return c
}

// projection is the View's projection of a table: nil for the current
// version (or an identity), the table unknown to the version when ok is
// false.
func (b *Batch) projection(table string) (p *schema.Projection, ok bool) {
	if b.View.IsCurrent() {
		return nil, true
	}
	p = b.View.Table(table)
	if p == nil {
		return nil, false
	}
	if p.Identity() {
		return nil, true
	}
	return p, true
}

// Package round is one SSP2 sync round, over POST /sync or a socket: it
// decodes an SSP2 request, plans it (wire version admission, schema
// floor, log epoch, client id binding, operation cap, one scope
// resolution per request, the auth lease) and runs its commits through
// the push pipeline of SPEC §6 (app/push), answering the response frames
// the transport encodes.
//
// Pull (PULL_HEADER and subscriptions) runs after the pushes, in the same
// response, through app/pull; without a pull service a request that carries
// one is refused as a whole with sync.internal_error before any push is
// applied, so a client never mistakes it for a caught-up pull.
package round

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/leases"
	pullsvc "github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/domain/limits"
	dompush "github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Store is the storage a round reads and binds with (its commits write
// through the Pusher). A store that is also a ports.RequestHeadStore
// reads a request's first reads in one round trip; admitting wire 1 needs
// one (its head says whether the partition's epoch was rotated).
type Store interface {
	TouchPartition(ctx context.Context, partition string, nowMs int64) (string, error)
	GetClient(ctx context.Context, partition, clientID string) (*ports.ClientRecord, error)
	BindClient(ctx context.Context, partition, clientID, actorID string) (string, error)
	ClientBinding(ctx context.Context, partition, clientID string) (string, bool, error)
	ReadServeGate(ctx context.Context, partition string, running int32) (checkpoint.ServeGate, error)
}

// Pusher runs a request's commits through the push pipeline, one at a
// time and in order; *push.Pipeline is one.
type Pusher interface {
	Commit(ctx context.Context, b *push.Batch, pc *ssp2.PushCommit) (*ssp2.PushResult, *ssp2.PushResultDetails, error)
}

// Wire versions this server can serve.
const (
	MaxWireVersion uint16 = 3
	// DefaultMinWireVersion is the reference 0.24 window: wire 3 only.
	DefaultMinWireVersion uint16 = 3
	// LowestMinWireVersion is the oldest generation that may be admitted:
	// wire 1, the 0.15 window's oldest (wires 1 and 2 are answered by
	// their own rules where they and wire 3 differ; see ARCHITECTURE.md).
	LowestMinWireVersion uint16 = 1
)

// Options configure a Service.
type Options struct {
	// Schema returns the running compiled schema (nil before it compiled).
	Schema func() *schema.Schema
	// Window returns the served schema window (SPEC §9), whose current
	// schema is Schema's; nil: the window of Schema alone.
	Window func() *schema.Window
	Store  Store
	// Resolver returns the actor's allowed scopes, once per request.
	Resolver ports.ScopeResolver
	// Push runs the commits (SPEC §A.2).
	Push Pusher
	// Declarations are the checkpoints this process declared (serve gate).
	Declarations []checkpoint.Declaration
	// Leases issues auth leases on live-resolved rounds and serves
	// resolver outages from them (SPEC §7.3); nil: leases off, and an
	// outage fails the request with sync.auth_lease_required.
	Leases *leases.Service
	// Pull serves PULL_HEADER and its subscriptions; nil refuses pulls
	// with sync.internal_error (a server assembled without it is broken).
	Pull *pullsvc.Service
	// Clients counts the clients by the schema version of their rounds
	// (syncd_clients_by_schema_version); nil counts nothing.
	Clients *SchemaClients
	// Events hears every request handled, pull served and scope
	// resolution failed (domain/event; the pipeline's own sink hears the
	// commits answered); nil: nothing listens, and no event is built.
	Events ports.EventSink

	// MinWireVersion is the oldest admitted wire version (1, 2 or 3; 0 → 3).
	MinWireVersion uint16
	// MaxOperations caps the operations of one request (0 → 500).
	MaxOperations int
	// Limits bound the ids and shape of a request (zero fields: the
	// defaults of domain/limits).
	Limits limits.Limits
	// MaxFrameBytes and MaxMessageBytes bound decoding (0 → codec defaults).
	MaxFrameBytes   int
	MaxMessageBytes int64

	// HeadReuse lets a push-only request skip its request head when this
	// process read the partition's head less than this long ago (at most
	// the storage's touch interval; 0: every request reads its head). See
	// headmemo.go.
	HeadReuse time.Duration

	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *zap.Logger
}

// Service serves sync rounds: POST /sync requests and socket rounds.
type Service struct {
	o        Options
	versions []uint16
	log      *zap.Logger
	vlog     versionLog
	heads    headMemo
}

// New validates opts and builds the Service.
func New(o Options) (*Service, error) {
	if o.Schema == nil || o.Store == nil || o.Resolver == nil || o.Push == nil {
		return nil, errors.New("round: Schema, Store, Resolver and Push are required")
	}
	if o.MinWireVersion == 0 {
		o.MinWireVersion = DefaultMinWireVersion
	}
	if o.MinWireVersion < LowestMinWireVersion || o.MinWireVersion > MaxWireVersion {
		return nil, fmt.Errorf("round: minimum wire version %d: want %d to %d", o.MinWireVersion, LowestMinWireVersion, MaxWireVersion)
	}
	if _, ok := o.Store.(ports.RequestHeadStore); o.MinWireVersion < 2 && !ok {
		// Only the request head says whether the partition's epoch was
		// rotated, which closes a partition to wire 1.
		return nil, fmt.Errorf("round: admitting wire 1 needs a store that reads request heads (%T does not)", o.Store)
	}
	if o.MaxOperations < 0 {
		return nil, errors.New("round: negative operation cap")
	}
	if o.MaxOperations == 0 {
		o.MaxOperations = dompush.DefaultMaxOperationsPerRequest
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Limits = o.Limits.WithDefaults()
	if o.Window == nil {
		o.Window = schema.Follow(o.Schema)
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	s := &Service{o: o, log: o.Log}
	for v := o.MinWireVersion; v <= MaxWireVersion; v++ {
		s.versions = append(s.versions, v)
	}
	return s, nil
}

// Versions returns the admitted wire versions, ascending.
func (s *Service) Versions() []uint16 { return append([]uint16(nil), s.versions...) }

// Response is a whole sync response: the frames to encode at WireVersion
// (END is added by the encoder).
type Response struct {
	WireVersion uint16
	Frames      []ssp2.Frame
	// Sections are the encoded pull sections (SUB_START … SUB_END frames),
	// written after Frames and before END; nil without a pull. Release
	// frees them.
	Sections *pullsvc.Spool
}

// Encode writes the response message to w: the envelope header, the
// frames, the pull sections and END. It is the one encoding of a response,
// whichever binding carries it (POST /sync, a socket round).
func (r *Response) Encode(w io.Writer) error {
	enc := ssp2.NewEncoder(w, ssp2.KindResponse, r.WireVersion)
	for _, f := range r.Frames {
		if err := enc.WriteFrame(f); err != nil {
			return err
		}
	}
	if r.Sections != nil {
		// Pull sections, already encoded (the encoder writes each frame
		// through, so their order holds).
		if _, err := r.Sections.WriteTo(w); err != nil {
			return err
		}
	}
	return enc.Close()
}

// ErrorResponse is the minimal response a binding without an HTTP status
// (a socket round, SPEC §8.7) answers a request-level failure with:
// RESP_HEADER, the error as an ERROR frame, END. Errors without an exposed
// catalog code become sync.internal_error.
func ErrorResponse(err error, wireVersion uint16, logEpoch string) *Response {
	pub := syncerr.Public(err)
	b := pub.Body()
	f := &ssp2.Error{Code: string(b.Code), Message: b.Message, Category: string(b.Category),
		Retryable: b.Retryable, RecommendedAction: string(b.RecommendedAction)}
	if len(b.Details) > 0 {
		f.Details = ssp2.Some(string(b.Details))
	}
	h := &ssp2.RespHeader{LogEpoch: logEpoch}
	return &Response{WireVersion: wireVersion, Frames: []ssp2.Frame{h.ForWire(wireVersion), f}}
}

// Release frees the buffered pull sections (memory or temporary file).
func (r *Response) Release() {
	if r != nil && r.Sections != nil {
		_ = r.Sections.Close()
		r.Sections = nil
	}
}

// Handle serves one request body for an authenticated identity. A non-nil
// error is a request-level failure, answered before any response byte
// (HTTP JSON with the catalog status). Every successful response is built
// completely before it is returned, after the serve gate was read again
// (0.24's buffered read-verify), so no byte escapes past a gate refusal.
func (s *Service) Handle(ctx context.Context, id ports.Identity, body []byte) (*Response, error) {
	if s.o.Events == nil {
		resp, _, err := s.handle(ctx, id, body)
		return resp, err
	}
	began := s.o.Now()
	resp, rq, err := s.handle(ctx, id, body)
	e := event.RequestHandled{Who: event.Who{Partition: id.Partition, ActorID: id.ActorID},
		Transport: transportOf(ctx), Code: event.CodeOf(err)}
	if rq != nil {
		e.WireVersion, e.Commits, e.Subscriptions = int64(rq.wire), int64(len(rq.commits)), int64(len(rq.subs))
		if rq.hdr != nil {
			e.ClientID = rq.hdr.ClientID
		}
	}
	e.Duration = s.o.Now().Sub(began)
	s.o.Events.Emit(e)
	return resp, err
}

// transportKey marks a context whose request arrived on a binding other
// than POST /sync.
type transportKey struct{}

// WithTransport marks ctx as carrying a request of transport t (a socket
// round), for the request's event.
func WithTransport(ctx context.Context, t event.Transport) context.Context {
	return context.WithValue(ctx, transportKey{}, t)
}

func transportOf(ctx context.Context) event.Transport {
	if t, ok := ctx.Value(transportKey{}).(event.Transport); ok {
		return t
	}
	return event.TransportHTTP
}

// handle is Handle; rq is the decoded request once there is one.
func (s *Service) handle(ctx context.Context, id ports.Identity, body []byte) (*Response, *request, error) {
	win := s.o.Window()
	if win == nil {
		return nil, nil, syncerr.Newf(syncerr.SchemaNotReady, "schema not compiled yet")
	}
	sch := win.Current()
	msg, err := ssp2.DecodeWith(body, ssp2.DecodeOptions{
		Versions:        s.versions,
		MaxFrameBytes:   s.o.MaxFrameBytes,
		MaxMessageBytes: s.o.MaxMessageBytes,
	})
	if err != nil {
		return nil, nil, asRequestError(s.refuseVersion(err), syncerr.InvalidRequest)
	}
	if msg.Kind != ssp2.KindRequest {
		return nil, nil, syncerr.Newf(syncerr.InvalidRequest, "message kind %s is not a request", msg.Kind)
	}
	rq := &request{s: s, sch: sch, win: win, id: id, wire: msg.WireVersion, now: s.o.Now()}
	var pull bool
	for _, f := range msg.Frames {
		switch f := f.(type) {
		case *ssp2.ReqHeader:
			rq.hdr = f
		case *ssp2.PushCommit:
			rq.commits = append(rq.commits, f)
		case *ssp2.PullHeader:
			rq.pullHdr = f
			pull = true
		case *ssp2.Subscription:
			rq.subs = append(rq.subs, f)
			pull = true
		}
	}
	if rq.hdr == nil {
		return nil, rq, syncerr.Newf(syncerr.InvalidRequest, "request without REQ_HEADER")
	}
	// Host limits on ids and shape, before any storage work: an overlong
	// id must not reach a lookup, and the subscription count bounds the
	// pull's planning.
	if err := s.o.Limits.Request(rq.hdr, rq.commits, rq.subs); err != nil {
		return nil, rq, err
	}
	resp, err := s.serve(ctx, rq, pull)
	if errors.Is(err, push.ErrStaleEpoch) {
		// Its head then remembers the current epoch.
		rq.restart()
		resp, err = s.serve(ctx, rq, pull)
	}
	if err == nil {
		s.o.Clients.Observe(id.Partition, rq.hdr.ClientID, rq.hdr.SchemaVersion, rq.now)
	}
	return resp, rq, err
}

type request struct {
	s   *Service
	sch *schema.Schema
	win *schema.Window
	// view is the request's schema version in the window (nil: not
	// served, the request gets the floor).
	view    *schema.View
	id      ports.Identity
	wire    uint16
	now     time.Time
	hdr     *ssp2.ReqHeader
	commits []*ssp2.PushCommit
	pullHdr *ssp2.PullHeader
	subs    []*ssp2.Subscription
	epoch   string
	res     scopes.Resolution
	// live: res came from the resolver itself (the round issues a lease).
	live bool
	// bound: the client id was bound to this actor when the request began.
	bound bool
	// push is the request's commits as the pipeline sees them, built
	// anew each time the request is served. It also keeps the request's
	// first serve-gate read (the entry read, or for a push-only request
	// the first push transaction's): the read-verify compares its token
	// with the last read. A value, so a round allocates no batch of its own.
	push push.Batch
	// headless: admitted at a remembered epoch without a request head
	// (headmemo.go). mustHead: served again after a stale epoch, the
	// request reads its head whatever is remembered by then (and is
	// answered with the reset before its scopes are resolved again).
	headless, mustHead bool
}

// restart readies a request stopped by push.ErrStaleEpoch (before
// anything of it committed) to be served again from its head.
func (rq *request) restart() {
	rq.headless, rq.mustHead, rq.live = false, true, false
	rq.epoch = ""
}

func (s *Service) serve(ctx context.Context, rq *request, pull bool) (*Response, error) {
	part := rq.id.Partition
	running := rq.sch.Version
	rq.view = rq.win.View(rq.hdr.SchemaVersion)
	rq.push = push.Batch{Identity: rq.id, ClientID: rq.hdr.ClientID, WireVersion: rq.wire, Schema: rq.sch,
		View: rq.view, Now: rq.now, Commits: rq.commits}
	var head ports.RequestHead
	if epoch, ok := s.headless(rq, pull); ok && !rq.mustHead {
		head.LogEpoch, rq.headless = epoch, true
		rq.push.RememberedEpoch = epoch
	} else {
		var err error
		if head, err = s.touch(ctx, rq); err != nil {
			return nil, fmt.Errorf("touch partition: %w", err)
		}
		// Stamped when read, so a head read later wins over one read
		// before it (a rotation between them).
		s.heads.note(part, head.LogEpoch, s.o.Now())
	}
	var err error
	epoch := head.LogEpoch
	rq.epoch = epoch
	// Entry gate read (SPEC-MAP C.7: after touchPartition, before any other
	// work). A push-only request defers it: each commit's transaction reads
	// the gate right after the partition lock, before any write and before
	// the locked idempotency re-check (the authoritative read, on the same
	// snapshot as the writes), and the read-verify below re-reads it before
	// the first byte, so an entry read would only repeat the first of them.
	// What the entry read decides is kept: every answer given before the
	// pushes (schema floor, reset, validation and binding errors) and a
	// failed push read the gate first, so a refusal still takes precedence
	// exactly as at entry; the token base is the first transaction's read,
	// and the epoch the response header carries is checked too.
	// A request with a pull reads it here: the pull's reads need a base
	// taken before them.
	deferGate := !pull && rq.pullHdr == nil && len(rq.commits) > 0
	rq.push.PushOnly = deferGate
	if !deferGate {
		if err := s.entryGateFrom(ctx, rq, head); err != nil {
			return nil, err
		}
	}
	early := func(resp *Response, err error) (*Response, error) {
		if errors.Is(err, push.ErrStaleEpoch) {
			return nil, err // served again, from its head
		}
		if !rq.gateRead() {
			// A refusal wins over err; a failed gate read fails an answer
			// but does not replace an error already at hand.
			if gerr := s.entryGate(ctx, rq); gerr != nil && (err == nil || rq.gateRead()) {
				return nil, gerr
			}
		}
		return resp, err
	}
	resp := &Response{WireVersion: rq.wire}

	// Wire 1 carries no log epoch either way (the 0.15 SPEC §2.1, §9): it
	// is served until the partition's epoch is first rotated, and refused
	// from then on before any other request work, since its client could
	// not notice the discontinuity. A rotation after the head was read is
	// caught by the read-verify (the epoch moved), and the retry is refused.
	if rq.wire < 2 && head.EpochRequired {
		return early(nil, syncerr.Newf(syncerr.ClientWireUnsupported,
			"partition log epoch was rotated; wire-1 clients cannot validate it (§2.1)").
			WithMessage("this partition's log was restored (its epoch rotated): a wire-1 client cannot sync here any more; upgrade to a client that sends a log epoch"))
	}
	reset := rq.wire >= 2 && dompush.AdmitEpoch(rq.hdr.LogEpoch.Value, rq.hdr.LogEpoch.Present, epoch).ResetRequired()
	// §1.6 schema floor: this server codes rows for the versions of its
	// window only (§9); the floor names the oldest as required and the
	// current as latest. The header still says whether the epoch needs
	// a reset.
	if rq.view == nil {
		h := &ssp2.RespHeader{
			RequiredSchemaVersion: ssp2.Some(rq.win.Oldest()),
			LatestSchemaVersion:   ssp2.Some(running),
			LogEpoch:              epoch,
			ResetRequired:         reset,
		}
		resp.Frames = []ssp2.Frame{h.ForWire(rq.wire)}
		return early(resp, nil)
	}
	// §2.1 log epoch, before any other request work.
	if reset {
		resp.Frames = []ssp2.Frame{&ssp2.RespHeader{LatestSchemaVersion: ssp2.Some(running), LogEpoch: epoch, ResetRequired: true}}
		return early(resp, nil)
	}
	if pull && s.o.Pull == nil {
		return early(nil, syncerr.Newf(syncerr.InternalError, "no pull service configured"))
	}
	// §1.7 and §4.1–§4.3: pull validation is request-level, before any push.
	// A subscription is validated against the client's schema version:
	// a table it does not declare is unknown to it (§9).
	if err := pullsvc.Validate(rq.view.Schema(), rq.pullHdr, rq.subs); err != nil {
		return early(nil, err)
	}
	// §1.5 client id binding and §6.1 operation cap: request-level. The
	// binding read here refuses another actor's id before any work; an
	// unbound id is bound by its first use, atomically with it: in the
	// first push's transaction, or right before a pull is served.
	boundTo, bound, err := s.o.Store.ClientBinding(ctx, part, rq.hdr.ClientID)
	if err != nil {
		return early(nil, fmt.Errorf("read client binding: %w", err))
	}
	if err := dompush.CheckClientID(rq.hdr.ClientID, rq.id.ActorID, boundTo, bound); err != nil {
		return early(nil, err)
	}
	rq.bound = bound
	var rec *ports.ClientRecord
	if rq.pullHdr != nil {
		if head.ClientRead {
			rec = head.Client
		} else if rec, err = s.o.Store.GetClient(ctx, part, rq.hdr.ClientID); err != nil {
			return early(nil, fmt.Errorf("read client record: %w", err))
		}
		if rec != nil && rec.ActorID != rq.id.ActorID {
			return early(nil, dompush.CheckClientID(rq.hdr.ClientID, rq.id.ActorID, rec.ActorID, true))
		}
	}
	perCommit := make([]int, len(rq.commits))
	for i, c := range rq.commits {
		perCommit[i] = len(c.Operations)
	}
	if err := dompush.CheckOperationCap(perCommit, s.o.MaxOperations); err != nil {
		return early(nil, err)
	}
	if len(rq.commits) > 0 || rq.pullHdr != nil {
		if err := s.resolve(ctx, rq); err != nil {
			return early(nil, err)
		}
	}
	// Every header names the newest schema version this server knows
	// (§1.6, informational), as the reference does, not only the floor.
	h := &ssp2.RespHeader{LatestSchemaVersion: ssp2.Some(running), LogEpoch: epoch}
	resp.Frames = append(resp.Frames, h.ForWire(rq.wire))
	rq.push.Scopes = rq.res
	// pushed is the newest commit this request applied: the pull after
	// the pushes must read a log that holds it (SPEC §7).
	var pushed int64
	for _, c := range rq.commits {
		result, details, err := s.o.Push.Commit(ctx, &rq.push, c)
		if err != nil {
			return early(nil, err)
		}
		if result.Status == ssp2.PushApplied {
			pushed = max(pushed, result.CommitSeq)
		}
		resp.Frames = append(resp.Frames, result)
		if details != nil {
			resp.Frames = append(resp.Frames, details)
		}
	}
	// Pull sections after the pushes, built completely into a bounded
	// buffer (memory, then a temporary file) before the gate re-read.
	var pullBegan time.Time
	if rq.pullHdr != nil {
		if !rq.bound {
			if err := s.bindForPull(ctx, rq); err != nil {
				return nil, err
			}
		}
		if s.o.Events != nil {
			pullBegan = s.o.Now()
		}
		resp.Sections = s.o.Pull.NewSpool()
		preq := pullsvc.Request{
			Partition: part, ActorID: rq.id.ActorID, ClientID: rq.hdr.ClientID,
			WireVersion: rq.wire, LogEpoch: epoch, Schema: rq.sch, View: rq.view,
			Header: rq.pullHdr, Subscriptions: rq.subs, Scopes: rq.res, Previous: rec, Pushed: pushed,
		}
		if head.BoundsRead && len(rq.commits) == 0 {
			// Nothing of this request wrote since the head was read.
			preq.Bounds = &head.Bounds
			if head.GateRead {
				preq.Gate = &head.Gate
			}
		}
		err := s.o.Pull.Pull(ctx, preq, resp.Sections)
		if err != nil {
			resp.Release()
			return nil, err
		}
	}
	// Buffered read-verify (0.24): re-read the gate before the first byte
	// (the pull may have read it with its last read).
	after, verified := resp.Sections.VerifiedGate()
	if !verified {
		after, verified = rq.push.GateAfter()
	}
	if !verified {
		if after, err = s.o.Store.ReadServeGate(ctx, part, running); err != nil {
			resp.Release()
			return nil, fmt.Errorf("read serve gate: %w", err)
		}
	}
	if r := checkpoint.GateRefusal(after, running, s.o.Declarations); r != nil {
		resp.Release()
		return nil, r.Err()
	}
	before, read := rq.push.Gate()
	if !read {
		// Every commit was a replay answered before its transaction: the
		// epoch in the response header is the base.
		before = checkpoint.ServeGate{StoredSchemaVersion: after.StoredSchemaVersion, LogEpoch: epoch}
	}
	r := checkpoint.TokenChanged(before, after)
	if r == nil && deferGate {
		// The base was read after touchPartition, in a push transaction:
		// the epoch the response header carries must still be current.
		r = checkpoint.TokenChanged(checkpoint.ServeGate{StoredSchemaVersion: after.StoredSchemaVersion, LogEpoch: epoch}, after)
	}
	if r != nil {
		resp.Release()
		return nil, r.Err()
	}
	if err := s.issueLease(ctx, rq, resp); err != nil {
		resp.Release()
		return nil, err
	}
	// The client record only once the response is to be sent: a refused
	// one leaves the recorded cursor at what the client last received.
	if resp.Sections != nil {
		if err := s.o.Pull.RecordClient(ctx, resp.Sections); err != nil {
			resp.Release()
			return nil, err
		}
		if s.o.Events != nil {
			s.pullServed(rq, resp.Sections, pullBegan)
		}
	}
	return resp, nil
}

// pullServed emits the pull's event once its response is to be sent.
func (s *Service) pullServed(rq *request, sp *pullsvc.Spool, began time.Time) {
	v := sp.Served()
	s.o.Events.Emit(event.PullServed{
		Who:           event.Who{Partition: rq.id.Partition, ActorID: rq.id.ActorID, ClientID: rq.hdr.ClientID},
		Subscriptions: int64(len(rq.subs)),
		Incremental:   int64(v.Incremental), Bootstrap: int64(v.Bootstrap), Reset: int64(v.Reset), Revoked: int64(v.Revoked),
		Commits: int64(v.Commits), Bytes: sp.Len(), Duration: s.o.Now().Sub(began),
	})
}

// bindForPull binds a client id first used by this request's pull (the
// pushes before it, if any, bound it already: then this is a cached read).
func (s *Service) bindForPull(ctx context.Context, rq *request) error {
	boundTo, err := s.o.Store.BindClient(ctx, rq.id.Partition, rq.hdr.ClientID, rq.id.ActorID)
	if err != nil {
		return fmt.Errorf("bind client id: %w", err)
	}
	return dompush.CheckClientID(rq.hdr.ClientID, rq.id.ActorID, boundTo, true)
}

// resolve makes the request's one resolveScopes call (SPEC §3.2 rule 3):
// live, failed (fail closed), or during a resolver outage from the
// client's auth lease (§7.3.3; a refusal fails the request).
var _ ports.SyncService = (*Service)(nil)

// Sync implements ports.SyncService for the transports that write a
// response whole (POST /sync): Handle, its response as the port's.
func (s *Service) Sync(ctx context.Context, id ports.Identity, body []byte) (ports.SyncResponse, error) {
	resp, err := s.Handle(ctx, id, body)
	if err != nil {
		// A nil *Response in the interface would not compare equal to nil.
		return nil, err
	}
	return resp, nil
}

func (s *Service) resolve(ctx context.Context, rq *request) error {
	res, err := leases.Resolve(ctx, s.o.Leases, s.o.Resolver, ports.ScopeRequest{
		Partition: rq.id.Partition, ActorID: rq.id.ActorID, ClientID: rq.hdr.ClientID,
	}, rq.sch.ScopeVariables())
	if err != nil {
		outage := ports.IsResolverOutage(err)
		if outage {
			s.log.Info("scope resolver outage not served from an auth lease", zap.String("request_id", ports.RequestID(ctx)),
				zap.String("partition", rq.id.Partition), zap.String("client_id", rq.hdr.ClientID), zap.Error(err))
		}
		s.resolutionFailed(rq, outage, false, event.CodeOf(err))
		return err
	}
	switch res.Outcome {
	case leases.Failed:
		// Fail closed: every write of the request is forbidden and every
		// subscription revoked.
		s.log.Warn("scope resolver failed; writes of this request are forbidden",
			zap.String("request_id", ports.RequestID(ctx)), zap.String("partition", rq.id.Partition), zap.Error(res.Cause))
		s.resolutionFailed(rq, false, false, "")
	case leases.Leased:
		// The resolver is down; the lease carries the round.
		s.resolutionFailed(rq, true, true, "")
	case leases.Live:
		rq.live = true
	}
	rq.res = res.Scopes
	return nil
}

// resolutionFailed emits the request's failed scope resolution: code is
// what the request was refused with ("" when it went on, fail closed or
// on the client's lease).
func (s *Service) resolutionFailed(rq *request, outage, leased bool, code string) {
	if s.o.Events == nil {
		return
	}
	s.o.Events.Emit(event.ScopeResolutionFailed{
		Who:       event.Who{Partition: rq.id.Partition, ActorID: rq.id.ActorID, ClientID: rq.hdr.ClientID},
		Operation: event.OperationSync, Outage: outage, Leased: leased, Code: code,
	})
}

// issueLease issues or refreshes the client's auth lease after a
// live-resolved round (§7.3.3) and puts its LEASE frame right after
// RESP_HEADER (§7.3.2). Nothing happens with leases off, or on a round
// that did not resolve live (floor, reset, failed resolver, outage).
func (s *Service) issueLease(ctx context.Context, rq *request, resp *Response) error {
	if s.o.Leases == nil || !rq.live {
		return nil
	}
	rec, err := s.o.Leases.Issue(ctx, rq.id.Partition, rq.hdr.ClientID, rq.id.ActorID, rq.res.Allowed())
	if err != nil {
		return err
	}
	f := &ssp2.Lease{LeaseID: rec.LeaseID, ExpiresAtMs: rec.ExpiresAtMs}
	resp.Frames = append(resp.Frames[:1], append([]ssp2.Frame{f}, resp.Frames[1:]...)...)
	return nil
}

// asRequestError keeps a catalog error and wraps anything else in code.
func asRequestError(err error, code syncerr.Code) error {
	var se *syncerr.Error
	if errors.As(err, &se) {
		return err
	}
	return syncerr.Wrap(code, err)
}

// touch is TouchPartition, with the request's other first reads taken in
// the same round trip where the store can (ports.RequestHeadStore):
// whether the epoch was rotated, the entry gate, the client record of a
// pull, the log bounds and the optimistic idempotency lookup of the first
// commit. New refuses to admit wire 1 over a store that cannot.
func (s *Service) touch(ctx context.Context, rq *request) (ports.RequestHead, error) {
	hs, ok := s.o.Store.(ports.RequestHeadStore)
	if !ok {
		epoch, err := s.o.Store.TouchPartition(ctx, rq.id.Partition, rq.now.UnixMilli())
		return ports.RequestHead{LogEpoch: epoch}, err
	}
	q := ports.HeadQuery{Partition: rq.id.Partition, Running: rq.sch.Version, NowMs: rq.now.UnixMilli()}
	if rq.pullHdr != nil {
		q.ClientID = rq.hdr.ClientID
	}
	if len(rq.commits) > 0 {
		q.PushClientID, q.PushClientCommitID = rq.hdr.ClientID, rq.commits[0].ClientCommitID
	}
	h, err := hs.TouchPartitionHead(ctx, q)
	if err == nil && h.PushRead {
		rq.push.Head = &h
	}
	return h, err
}

// entryGateFrom is entryGate answered by the request head when it holds
// the gate.
func (s *Service) entryGateFrom(ctx context.Context, rq *request, head ports.RequestHead) error {
	if !head.GateRead {
		return s.entryGate(ctx, rq)
	}
	return s.admitGate(rq, head.Gate)
}

// entryGate reads the serve gate on the read pool, records it as the
// request's first read if none was taken yet, and returns its refusal.
func (s *Service) entryGate(ctx context.Context, rq *request) error {
	g, err := s.o.Store.ReadServeGate(ctx, rq.id.Partition, rq.sch.Version)
	if err != nil {
		return fmt.Errorf("read serve gate: %w", err)
	}
	return s.admitGate(rq, g)
}

// admitGate records g as the request's first gate read if none was taken
// yet and returns its refusal.
func (s *Service) admitGate(rq *request, g checkpoint.ServeGate) error {
	rq.push.NoteGate(g)
	if r := checkpoint.GateRefusal(g, rq.sch.Version, s.o.Declarations); r != nil {
		return r.Err()
	}
	return nil
}

// gateRead reports whether the request read the serve gate yet.
func (rq *request) gateRead() bool {
	_, read := rq.push.Gate()
	return read
}

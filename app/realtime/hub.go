// Package realtime is the §8 realtime channel: the sessions of the
// realtime sockets, registered from the client's persisted subscriptions,
// woken by the fanout's commit notices to send cursor-contiguous deltas
// (read from storage: a notice carries no data) or coalesced wake-ups, and
// carrying sync rounds through the same handler as POST /sync.
package realtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/app/sockets"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Store is the storage the realtime channel needs.
type Store interface {
	TouchPartition(ctx context.Context, partition string, nowMs int64) (string, error)
	LogEpoch(ctx context.Context, partition string) (epoch string, ok bool, err error)
	GetClient(ctx context.Context, partition, clientID string) (*ports.ClientRecord, error)
	BindClient(ctx context.Context, partition, clientID, actorID string) (string, error)
	AdvanceClientCursor(ctx context.Context, a ports.CursorAdvance) (bool, error)
	LogBounds(ctx context.Context, partition string) (ports.LogBounds, error)
	ReadCommitWindow(ctx context.Context, partition string, w ports.CommitWindow) ([]commit.Commit, error)
	ReadCommitRange(ctx context.Context, partition string, r ports.CommitRange) (ports.CommitSpan, error)
}

// Rounds serves the sync rounds of the sockets: *round.Service, the
// handler of POST /sync.
type Rounds interface {
	Handle(ctx context.Context, id ports.Identity, body []byte) (*round.Response, error)
}

// Metrics hears what the channel does; nil fields are not called.
type Metrics interface {
	// Sockets is called with +1 and -1 as sockets open and close.
	Sockets(delta int)
	// Delta is called for every delta sent, with its size.
	Delta(bytes int)
	// Wake is called for every wake-up sent, by reason.
	Wake(reason realtime.WakeReason)
	// Dropped is called for every delta not sent (oversize, slow consumer,
	// suppressed while behind or mid-round).
	Dropped()
	// Round is called for every socket round served.
	Round()
	// Overflow is called for every socket closed because its send queue
	// overflowed (a client that does not read).
	Overflow()
	// Presence is called for every presence event (PresenceJoined, …).
	Presence(event string)
	// PresenceDocs is called with +1 and -1 as documents come and go.
	PresenceDocs(delta int)
	// Notice is called for every commit notice published, not published
	// and received, and for every resync (NoticePublished, …).
	Notice(event string)
}

// Notice events counted by Metrics.Notice.
const (
	NoticePublished     = "published"
	NoticePublishFailed = "publish_failed"
	NoticeReceived      = "received"
	NoticeResync        = "resync"
)

// Defaults.
const (
	DefaultMaxDeltaBytes  = 1 << 20
	DefaultWriteTimeout   = 10 * time.Second
	DefaultSendQueueBytes = 4 << 20
	DefaultChunkBytes     = 64 << 10
	// deltaChangeCap bounds the changes one delta reads; more is sent as
	// delta-too-large (the client pulls, which pages).
	deltaChangeCap = 10_000
)

// Options configure a Hub.
type Options struct {
	Store  Store
	Schema func() *schema.Schema
	// Window returns the served schema window (SPEC §9), whose current
	// schema is Schema's: each registration's deltas are projected onto
	// the schema version its last pull recorded. Nil: Schema alone.
	Window   func() *schema.Window
	Resolver ports.ScopeResolver
	// Clients counts a socket's client under its registrations' schema
	// version at registration and at each ack; nil counts nothing.
	Clients *round.SchemaClients
	// Leases, when set, serves a resolver outage from the client's auth
	// lease at registration (SPEC §7.3.3), as a socket round's resolution
	// is; nil: an outage registers nothing.
	Leases *leases.Service
	Rounds Rounds
	// MaxDeltaBytes: a larger delta is a delta-too-large wake-up (0 → 1 MiB).
	MaxDeltaBytes int
	// MaxRequestBytes bounds a socket round's request (0: unbounded); a
	// larger one closes the socket with 1009.
	MaxRequestBytes int64
	// RoundTimeout bounds how long a socket round's request may take to
	// arrive once its first chunk is in (0: no bound); past it the socket
	// is closed with 1008.
	RoundTimeout time.Duration
	// Inflight, when set, bounds socket rounds as it bounds POST /sync: a
	// round's request is held on its memory budget as it arrives (no room
	// closes the socket with 1013) and takes a processing slot while it
	// is served (none free answers it sync.rate_limited).
	Inflight ports.Inflight
	// SendBudgetBytes bounds the bytes queued on all the node's sockets
	// together (0: only each socket's SendQueueBytes).
	SendBudgetBytes int64
	// PresenceRate bounds a socket's presence publishes per second, with
	// bursts of PresenceBurst (0: unbounded); faster publishes are held,
	// the latest per key winning, and applied as the rate allows.
	PresenceRate  float64
	PresenceBurst int
	// Heartbeat is the heartbeat interval (0: none).
	Heartbeat time.Duration
	// IdleTimeout closes a socket that answers no ping for this long (0:
	// no pings). Pings go out with the heartbeat.
	IdleTimeout time.Duration
	// WriteTimeout bounds one socket write (0 → 10 s).
	WriteTimeout time.Duration
	// SendQueueBytes bounds a session's queued outbound bytes (0 → 4 MiB):
	// a delta that does not fit is dropped for a wake-up, a round's
	// response waits for room.
	SendQueueBytes int
	// MaxSockets and MaxSocketsPerActor bound the sockets of this node and
	// of one actor on it (0: unbounded).
	MaxSockets         int
	MaxSocketsPerActor int
	// Sockets, when set, are the node's socket slots shared with the
	// other socket kinds (operation watches) and replace MaxSockets and
	// MaxSocketsPerActor.
	Sockets *sockets.Slots
	// Now is the clock; Sleep waits on it (heartbeats).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxPresenceBytes caps a presence document (0 → 16 KiB).
	MaxPresenceBytes int
	// Fanout, when set, carries presence to the other nodes.
	Fanout ports.Fanout
	// PresenceLease bounds how long a document heard from another node
	// outlives the last news from that node (0 → 30 s; see Maintain).
	PresenceLease time.Duration
	// Metrics, when set, hears the channel's events.
	Metrics Metrics
	// Events, when set, hears every socket connect and disconnect
	// (domain/event).
	Events ports.EventSink
	Log    *zap.Logger
	// Tracer, when set, puts every socket round in a span (tracing.go).
	Tracer trace.TracerProvider
}

// Hub holds the sessions of one node and implements ports.FanoutHandler.
type Hub struct {
	tracer trace.Tracer // nil: rounds are not traced

	o     Options
	send  *sendBudget
	log   *zap.Logger
	feeds feeds
	node  string // names this node in presence events
	pres  presence

	mu       sync.Mutex
	byPart   map[string]map[*Session]struct{}
	total    int
	draining bool
	wg       sync.WaitGroup
}

// New validates o and builds the hub.
func New(o Options) (*Hub, error) {
	if o.Store == nil || o.Schema == nil || o.Resolver == nil || o.Rounds == nil || o.Now == nil || o.Sleep == nil {
		// The clock is the app's: a use case reads no time of its own.
		return nil, errors.New("realtime: Store, Schema, Resolver, Rounds, Now and Sleep are required")
	}
	if o.MaxDeltaBytes < 0 || o.MaxPresenceBytes < 0 || o.PresenceLease < 0 || o.MaxSockets < 0 || o.MaxSocketsPerActor < 0 || o.SendQueueBytes < 0 ||
		o.SendBudgetBytes < 0 || o.PresenceRate < 0 || o.PresenceBurst < 0 || o.RoundTimeout < 0 || o.MaxRequestBytes < 0 {
		return nil, errors.New("realtime: negative limit")
	}
	if o.Window == nil {
		o.Window = schema.Follow(o.Schema)
	}
	if o.MaxDeltaBytes == 0 {
		o.MaxDeltaBytes = DefaultMaxDeltaBytes
	}
	if o.MaxPresenceBytes == 0 {
		o.MaxPresenceBytes = DefaultMaxPresenceBytes
	}
	if o.PresenceLease == 0 {
		o.PresenceLease = DefaultPresenceLease
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.SendQueueBytes == 0 {
		o.SendQueueBytes = DefaultSendQueueBytes
	}
	if o.PresenceRate > 0 && o.PresenceBurst == 0 {
		o.PresenceBurst = max(1, int(o.PresenceRate))
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Sockets == nil {
		var err error
		if o.Sockets, err = sockets.New(o.MaxSockets, o.MaxSocketsPerActor); err != nil {
			return nil, err
		}
	}
	h := &Hub{
		o: o, send: newSendBudget(o.SendBudgetBytes), log: o.Log, node: newSessionID(), feeds: feeds{m: map[string]*feed{}},
		pres:   presence{entries: map[pkey]map[peerID]*presenceEntry{}, holders: map[pkey]map[*Session]struct{}{}, heard: map[string]int64{}},
		byPart: map[string]map[*Session]struct{}{},
	}
	if o.Tracer != nil {
		h.tracer = o.Tracer.Tracer(tracerName)
	}
	return h, nil
}

func (h *Hub) nowMs() int64 { return h.o.Now().UnixMilli() }

// Commit implements ports.FanoutHandler: the partition's feed reads the
// commits once and wakes the sessions they matter to.
func (h *Hub) Commit(n ports.CommitNotice) {
	if h.o.Metrics != nil {
		h.o.Metrics.Notice(NoticeReceived)
	}
	h.feeds.noticed(n.Partition, n.CommitSeq)
}

// Event implements ports.FanoutHandler: presence heard from the nodes.
func (h *Hub) Event(e ports.FanoutEvent) {
	switch e.Topic {
	case TopicPresence:
		h.remotePresence(e)
	case TopicReset:
		if string(e.Payload) != h.node { // this node's were reset when published
			h.resetLocal(e.Key)
		}
	}
}

// TopicReset is the fanout topic of partition resets (ResetPartition).
const TopicReset = "reset"

// ResetPartition tells the partition's sessions, on every node, that its
// log is discontinuous (SPEC §8.3 reset-required: a restore rotated the
// log epoch, a forced resync): each session re-reads the epoch, the log
// bounds and its registrations (a rotation deletes the client records, so
// it keeps none until the client pulls again), suppresses deltas and is
// sent a reset-required wake-up.
func (h *Hub) ResetPartition(ctx context.Context, partition string) {
	h.resetLocal(partition)
	if h.o.Fanout == nil {
		return
	}
	if err := h.o.Fanout.PublishEvent(ctx, ports.FanoutEvent{Topic: TopicReset, Key: partition, Payload: []byte(h.node)}); err != nil {
		// The other nodes' sessions notice the new epoch on their next resync.
		h.log.Warn("partition reset not published to the other nodes", zap.String("partition", partition), zap.Error(err))
	}
}

func (h *Hub) resetLocal(partition string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.byPart[partition] {
		s.reset()
	}
}

// Resync implements ports.FanoutHandler: notices may have been lost, so
// every session reads its partition's log bounds and catches up.
func (h *Hub) Resync() {
	if h.o.Metrics != nil {
		h.o.Metrics.Notice(NoticeResync)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.byPart {
		for s := range set {
			s.resync()
		}
	}
}

// QueuedBytes is what all the node's sockets have queued to send.
func (h *Hub) QueuedBytes() int64 { return h.send.Used() }

// noShare is the round share without in-flight bounds.
type noShare struct{}

func (noShare) Reserve(int64) error { return nil }
func (noShare) Unreserve(int64)     {}
func (noShare) Acquire() error      { return nil }
func (noShare) Release()            {}

// Sessions returns the number of open sessions.
func (h *Hub) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// Admit prepares a session for an authenticated upgrade (SPEC §8.1): the
// socket limits, the client id bound to the actor, the client record and
// its registrations (scopes re-resolved), the log bounds for hello. A
// refusal is a catalog error, answered before the upgrade.
func (h *Hub) Admit(ctx context.Context, id ports.Identity, clientID string) (ports.RealtimeAdmission, error) {
	s, err := h.admit(ctx, id, clientID)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (h *Hub) admit(ctx context.Context, id ports.Identity, clientID string) (*Session, error) {
	if h.o.Schema() == nil {
		return nil, syncerr.Newf(syncerr.SchemaNotReady, "schema not compiled yet")
	}
	s := &Session{
		hub: h, id: id, clientID: clientID, sessionID: newSessionID(),
		wakeCh: make(chan struct{}, 1),
	}
	s.out = newOutbox(h.o.SendQueueBytes, h.send)
	s.scanner.MaxBytes = h.o.MaxRequestBytes
	s.share = noShare{}
	if h.o.Inflight != nil {
		s.share = h.o.Inflight.Share()
	}
	if err := h.reserve(s); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			h.release(s)
		}
	}()
	epoch, err := h.o.Store.TouchPartition(ctx, id.Partition, h.nowMs())
	if err != nil {
		return nil, fmt.Errorf("touch partition: %w", err)
	}
	s.epoch = epoch
	boundTo, err := h.o.Store.BindClient(ctx, id.Partition, clientID, id.ActorID)
	if err != nil {
		return nil, fmt.Errorf("bind client id: %w", err)
	}
	if err := push.CheckClientID(clientID, id.ActorID, boundTo, true); err != nil {
		return nil, err
	}
	rec, regs, err := h.load(ctx, id, clientID)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.ActorID != id.ActorID {
		return nil, push.CheckClientID(clientID, id.ActorID, rec.ActorID, true)
	}
	// Registered for notices before the bounds are read: a commit between
	// the two is then either below latest or noticed. From here the feed's
	// dispatcher reads the session: its state is written under s.mu.
	s.mu.Lock()
	s.regs = regs
	s.mu.Unlock()
	h.mu.Lock()
	set := h.byPart[id.Partition]
	if set == nil {
		set = map[*Session]struct{}{}
		h.byPart[id.Partition] = set
		h.feeds.open(h, id.Partition)
	}
	set[s] = struct{}{}
	h.mu.Unlock()
	b, err := h.o.Store.LogBounds(ctx, id.Partition)
	if err != nil {
		return nil, fmt.Errorf("read log bounds: %w", err)
	}
	s.mu.Lock()
	s.cursor, s.wire = -1, round.MaxWireVersion
	if rec != nil {
		s.cursor = rec.Cursor
		if rec.WireVersion > 0 {
			s.wire = uint16(rec.WireVersion)
		}
	}
	s.lastSeq, s.horizon = b.MaxSeq, b.HorizonSeq
	s.wakePending = s.cursor < b.MaxSeq
	s.hello = &realtime.Hello{
		ProtocolVersion: realtime.ProtocolVersion, SessionID: s.sessionID,
		ActorID: id.ActorID, ClientID: clientID, Cursor: s.cursor, LatestCursor: b.MaxSeq,
		RequiresSync: rec == nil || s.cursor < b.MaxSeq, Timestamp: h.nowMs(),
	}
	s.mu.Unlock()
	ok = true
	return s, nil
}

// reserve takes a socket slot for s.
func (h *Hub) reserve(s *Session) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.draining {
		return syncerr.Newf(syncerr.SchemaNotReady, "the server is draining")
	}
	if err := h.o.Sockets.Take(s.id); err != nil {
		return err
	}
	h.total++
	h.wg.Add(1)
	if h.o.Metrics != nil {
		h.o.Metrics.Sockets(1)
	}
	return nil
}

// release gives s's slot back and forgets it. Idempotent per session.
func (h *Hub) release(s *Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	if set := h.byPart[s.id.Partition]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(h.byPart, s.id.Partition)
			h.feeds.forget(s.id.Partition)
		}
	}
	h.o.Sockets.Release(s.id)
	h.total--
	h.wg.Done()
	if h.o.Metrics != nil {
		h.o.Metrics.Sockets(-1)
	}
}

// RefreshScopes re-resolves the registrations of the partition's sessions
// (of one actor when actorID is not empty), SPEC §8.7 host-initiated
// refresh. It fails closed: a session whose client record or scopes
// cannot be read loses every registration (and, with them, its presence).
// It returns the number of sessions refreshed.
func (h *Hub) RefreshScopes(ctx context.Context, partition, actorID string) int {
	h.mu.Lock()
	var ss []*Session
	for s := range h.byPart[partition] {
		if actorID == "" || s.id.ActorID == actorID {
			ss = append(ss, s)
		}
	}
	h.mu.Unlock()
	for _, s := range ss {
		_, regs, err := h.load(ctx, s.id, s.clientID)
		if err != nil {
			h.log.Warn("realtime scope refresh failed; the session keeps no registration",
				zap.String("partition", partition), zap.String("client_id", s.clientID), zap.Error(err))
			regs = nil
		}
		s.setRegistrations(regs)
		h.presenceRederive(s)
	}
	return len(ss)
}

// Drain refuses new sockets and closes every open one with 1001 (going
// away), then waits for them to end or ctx.
func (h *Hub) Drain(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	var ss []*Session
	for _, set := range h.byPart {
		for s := range set {
			ss = append(ss, s)
		}
	}
	h.mu.Unlock()
	for _, s := range ss {
		s.shutdown(ports.CloseGoingAway, "server shutting down")
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The sessions' leaves are queued; the other nodes drop whatever else
	// they still hold from this one.
	h.presenceGone(ctx)
	return nil
}

func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

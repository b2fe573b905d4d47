package realtime

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/ports"
)

// Presence (SPEC §8.6) is ephemeral, in-memory state per (partition, scope
// key): the documents of the peers present there. A session's registered
// scope keys are its grant, both to publish and to receive. Across nodes,
// every change travels as a fanout event; each node keeps the entries it
// heard from the others and fans them out to its own sessions.

// TopicPresence is the fanout topic of presence changes.
const TopicPresence = "presence"

// DefaultMaxPresenceBytes is the reference cap on a presence document.
const DefaultMaxPresenceBytes = 16 << 10

// presenceQueueCap bounds the events waiting for the fanout; past it new
// events are dropped (events are not durable: the next change corrects).
const presenceQueueCap = 10_000

// Presence events counted by Metrics.Presence.
const (
	PresenceJoined    = "join"
	PresenceUpdated   = "update"
	PresenceLeft      = "leave"
	PresenceForbidden = "forbidden"
	PresenceTooLarge  = "too_large"
	PresenceRemote    = "remote"  // a change heard from another node
	PresenceExpired   = "expired" // a document of a node gone silent, dropped
	PresenceHeld      = "held"    // a publish past the socket's rate, held (latest wins)
)

// DefaultPresenceLease is how long a document heard from another node
// outlives the last news from that node.
const DefaultPresenceLease = 30 * time.Second

type pkey struct{ partition, scope string }

// peerID is the identity presence is attributed to (§8.6.1): one document
// per (actor, client) and key, the latest publish winning.
type peerID struct{ actor, client string }

type presenceEntry struct {
	doc   *canonjson.Object
	owner *Session // the local publisher; nil when heard from a node
	node  string   // the publishing node when remote
}

type presence struct {
	mu      sync.Mutex
	entries map[pkey]map[peerID]*presenceEntry
	holders map[pkey]map[*Session]struct{}
	docs    int // entries, for the gauge
	out     eventQueue
	// heard is when each other node was last heard from (ms): its entries
	// expire a lease after that (a crashed node sends no leave).
	heard map[string]int64
}

// presenceWire is the payload of a presence fanout event.
type presenceWire struct {
	Node      string          `json:"node"`
	Partition string          `json:"partition,omitempty"`
	ScopeKey  string          `json:"scopeKey,omitempty"`
	ActorID   string          `json:"actorId,omitempty"`
	ClientID  string          `json:"clientId,omitempty"`
	Doc       json.RawMessage `json:"doc,omitempty"` // absent: a leave
	// Gone says the node stopped: every entry it published leaves.
	Gone bool `json:"gone,omitempty"`
	// Beat renews the node's lease on what it published.
	Beat bool `json:"beat,omitempty"`
}

// scopeKeys derives the presence grant of registrations: the scope keys
// (§3.1 prefix:value) of every effective scope value.
func (h *Hub) scopeKeys(regs []registration) map[string]struct{} {
	keys := map[string]struct{}{}
	sch := h.o.Schema()
	if sch == nil {
		return keys
	}
	for _, r := range regs {
		t := sch.Table(r.table)
		if t == nil {
			continue
		}
		for _, sc := range t.Scopes {
			for _, v := range r.effective[sc.Variable] {
				keys[sc.Key(v)] = struct{}{}
			}
		}
	}
	return keys
}

// presenceStart grants s presence on its registered keys once hello is
// queued, so the snapshot follows hello.
func (h *Hub) presenceStart(s *Session) {
	p := &h.pres
	p.mu.Lock()
	defer p.mu.Unlock()
	s.pactive = true
	h.rederiveLocked(s)
}

// presenceRederive follows a registration change (§8.6.3): keys lost
// leave, keys gained deliver their snapshot.
func (h *Hub) presenceRederive(s *Session) {
	p := &h.pres
	p.mu.Lock()
	defer p.mu.Unlock()
	h.rederiveLocked(s)
}

func (h *Hub) rederiveLocked(s *Session) {
	if !s.pactive || s.pdone {
		return
	}
	s.mu.Lock()
	regs := s.regs
	s.mu.Unlock()
	next := h.scopeKeys(regs)
	for k := range s.pkeys {
		if _, ok := next[k]; !ok {
			h.unholdLocked(s, k)
		}
	}
	for k := range next {
		if _, ok := s.pkeys[k]; ok {
			continue
		}
		pk := pkey{s.id.Partition, k}
		set := h.pres.holders[pk]
		if set == nil {
			set = map[*Session]struct{}{}
			h.pres.holders[pk] = set
		}
		set[s] = struct{}{}
		for id, e := range h.pres.entries[pk] {
			if e.owner != s {
				h.deliverState(s, &realtime.PresenceFanout{ScopeKey: k, Kind: realtime.PresenceJoin, ActorID: id.actor, ClientID: id.client, Doc: e.doc}, true)
			}
		}
	}
	s.pkeys = next
}

// presenceEnd is the disconnect (§8.6.1): s leaves every key.
func (h *Hub) presenceEnd(s *Session) {
	p := &h.pres
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range s.pkeys {
		h.unholdLocked(s, k)
	}
	s.pkeys = nil
	s.pdone = true
}

// unholdLocked removes s from k's holders, leaving with its own document.
func (h *Hub) unholdLocked(s *Session, k string) {
	pk := pkey{s.id.Partition, k}
	h.leaveLocked(s, pk)
	if set := h.pres.holders[pk]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(h.pres.holders, pk)
		}
	}
	delete(s.pkeys, k)
}

// leaveLocked removes s's own document on pk, telling the other holders
// and the other nodes. A document another connection of the same client
// took over is not s's to remove.
func (h *Hub) leaveLocked(s *Session, pk pkey) {
	id := peerID{s.id.ActorID, s.clientID}
	e := h.pres.entries[pk][id]
	if e == nil || e.owner != s {
		return
	}
	h.removeLocked(pk, id)
	h.fanLocal(pk, s, &realtime.PresenceFanout{ScopeKey: pk.scope, Kind: realtime.PresenceLeave, ActorID: id.actor, ClientID: id.client})
	h.count(PresenceLeft)
	h.publishRemote(presenceWire{Partition: pk.partition, ScopeKey: pk.scope, ActorID: id.actor, ClientID: id.client})
}

func (h *Hub) removeLocked(pk pkey, id peerID) {
	m := h.pres.entries[pk]
	delete(m, id)
	if len(m) == 0 {
		delete(h.pres.entries, pk)
	}
	h.pres.docs--
	if h.o.Metrics != nil {
		h.o.Metrics.PresenceDocs(-1)
	}
}

// presencePublish handles a client publish or leave (§8.6.2–§8.6.4).
// Publishes past the socket's rate are held, the latest per key winning,
// and applied as the rate allows: a client animating a cursor costs its
// scope-mates a bounded stream, and its last position still arrives.
func (s *Session) presencePublish(ctx context.Context, m *realtime.PresencePublish) {
	h := s.hub
	p := &h.pres
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := s.pkeys[m.ScopeKey]; !ok || s.pdone {
		h.count(PresenceForbidden)
		s.presenceError(m.ScopeKey, realtime.PresenceForbidden)
		return
	}
	var raw []byte
	if m.Doc != nil {
		raw = canonjson.Marshal(m.Doc, "")
		if len(raw) > h.o.MaxPresenceBytes {
			h.count(PresenceTooLarge)
			s.presenceError(m.ScopeKey, realtime.PresenceTooLarge)
			return
		}
	}
	if h.o.PresenceRate > 0 {
		if len(s.pheld) > 0 || !s.presenceRate.take(h.o.Now(), h.o.PresenceRate, h.o.PresenceBurst) {
			if s.pheld == nil {
				s.pheld = map[string]heldPublish{}
			}
			s.pheld[m.ScopeKey] = heldPublish{m: m, raw: raw}
			h.count(PresenceHeld)
			if !s.pflushing {
				s.pflushing = true
				go s.flushPresence(ctx)
			}
			return
		}
	}
	s.applyPublishLocked(m, raw)
}

// heldPublish is a publish waiting for the socket's presence rate.
type heldPublish struct {
	m   *realtime.PresencePublish
	raw []byte // its canonical document (nil: a leave)
}

// flushPresence applies held publishes as the socket's rate allows, until
// none is left or the session ends.
func (s *Session) flushPresence(ctx context.Context) {
	h := s.hub
	p := &h.pres
	for {
		p.mu.Lock()
		wait := s.presenceRate.wait(h.o.Now(), h.o.PresenceRate)
		p.mu.Unlock()
		if h.o.Sleep(ctx, wait) != nil {
			p.mu.Lock()
			s.pheld, s.pflushing = nil, false
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		for key, hp := range s.pheld {
			if !s.presenceRate.take(h.o.Now(), h.o.PresenceRate, h.o.PresenceBurst) {
				break
			}
			delete(s.pheld, key)
			// The grant may have changed while it was held.
			if _, ok := s.pkeys[key]; ok && !s.pdone {
				s.applyPublishLocked(hp.m, hp.raw)
			}
		}
		if len(s.pheld) == 0 {
			s.pflushing = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// applyPublishLocked stores a granted, size-checked publish or leave and
// tells the key's other holders and the other nodes.
func (s *Session) applyPublishLocked(m *realtime.PresencePublish, raw []byte) {
	h := s.hub
	pk := pkey{s.id.Partition, m.ScopeKey}
	if m.Doc == nil {
		h.leaveLocked(s, pk)
		return
	}
	id := peerID{s.id.ActorID, s.clientID}
	var payload []byte
	if h.o.Fanout != nil {
		// A document the fanout cannot carry would be seen here and
		// nowhere else: refused like an over-cap one.
		payload = encodePresence(presenceWire{Node: h.node, Partition: pk.partition, ScopeKey: pk.scope, ActorID: id.actor, ClientID: id.client, Doc: raw})
		if len(payload) > h.o.Fanout.MaxEventBytes() {
			h.count(PresenceTooLarge)
			s.presenceError(m.ScopeKey, realtime.PresenceTooLarge)
			return
		}
	}
	kind := h.storeLocked(pk, id, &presenceEntry{doc: m.Doc, owner: s})
	h.fanLocal(pk, s, &realtime.PresenceFanout{ScopeKey: pk.scope, Kind: kind, ActorID: id.actor, ClientID: id.client, Doc: m.Doc})
	h.count(string(kind))
	if payload != nil {
		h.pres.out.push(h, ports.FanoutEvent{Topic: TopicPresence, Key: pk.partition + "/" + pk.scope, Payload: payload})
	}
}

// tokenBucket is a rate limit read from the app clock: rate tokens a
// second, at most burst saved up.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

// take spends a token if one is there.
func (b *tokenBucket) take(now time.Time, rate float64, burst int) bool {
	if b.last.IsZero() {
		b.tokens, b.last = float64(burst), now
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(float64(burst), b.tokens+el.Seconds()*rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// wait is how long until the next token.
func (b *tokenBucket) wait(now time.Time, rate float64) time.Duration {
	missing := 1 - b.tokens - max(now.Sub(b.last), 0).Seconds()*rate
	if missing <= 0 {
		return 0
	}
	return time.Duration(missing / rate * float64(time.Second))
}

// storeLocked sets id's document on pk: a join when id was not present.
func (h *Hub) storeLocked(pk pkey, id peerID, e *presenceEntry) realtime.PresenceKind {
	m := h.pres.entries[pk]
	if m == nil {
		m = map[peerID]*presenceEntry{}
		h.pres.entries[pk] = m
	}
	_, had := m[id]
	m[id] = e
	if had {
		return realtime.PresenceUpdate
	}
	h.pres.docs++
	if h.o.Metrics != nil {
		h.o.Metrics.PresenceDocs(1)
	}
	return realtime.PresenceJoin
}

func (s *Session) presenceError(key, code string) {
	if t, err := realtime.Encode(&realtime.PresenceError{ScopeKey: key, Error: code, Timestamp: s.hub.nowMs()}); err == nil {
		s.queueControl(t, "")
	}
}

// fanLocal sends f to every holder of pk on this node but origin.
func (h *Hub) fanLocal(pk pkey, origin *Session, f *realtime.PresenceFanout) {
	for s := range h.pres.holders[pk] {
		if s != origin {
			h.deliver(s, f)
		}
	}
}

// deliver queues f for s, merged into a delivery about the same peer and
// key that s has not read yet.
func (h *Hub) deliver(s *Session, f *realtime.PresenceFanout) { h.deliverState(s, f, false) }

// deliverState is deliver for the join burst of a key s gains (state):
// the room as it is, queued whatever its size.
func (h *Hub) deliverState(s *Session, f *realtime.PresenceFanout, state bool) {
	c := *f
	c.Timestamp = h.nowMs()
	if !s.out.presence(&c, state) {
		s.overflowed()
	}
}

func (h *Hub) count(event string) {
	if h.o.Metrics != nil {
		h.o.Metrics.Presence(event)
	}
}

func (h *Hub) publishRemote(w presenceWire) {
	if h.o.Fanout == nil {
		return
	}
	w.Node = h.node
	h.pres.out.push(h, ports.FanoutEvent{Topic: TopicPresence, Key: w.Partition + "/" + w.ScopeKey, Payload: encodePresence(w)})
}

func encodePresence(w presenceWire) []byte {
	b, _ := json.Marshal(w) // strings and raw JSON only: cannot fail
	return b
}

// remotePresence applies a change heard from another node.
func (h *Hub) remotePresence(e ports.FanoutEvent) {
	var w presenceWire
	if err := json.Unmarshal(e.Payload, &w); err != nil || w.Node == "" {
		h.log.Warn("malformed presence event ignored", zap.Error(err))
		return
	}
	if w.Node == h.node {
		return // this node's own, already fanned out locally
	}
	p := &h.pres
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heard[w.Node] = h.nowMs()
	if w.Beat {
		return
	}
	h.count(PresenceRemote)
	if w.Gone {
		delete(p.heard, w.Node)
		for pk, m := range p.entries {
			for id, en := range m {
				if en.owner == nil && en.node == w.Node {
					h.removeLocked(pk, id)
					h.fanLocal(pk, nil, &realtime.PresenceFanout{ScopeKey: pk.scope, Kind: realtime.PresenceLeave, ActorID: id.actor, ClientID: id.client})
				}
			}
		}
		return
	}
	if w.ScopeKey == "" || w.ActorID == "" {
		return
	}
	pk, id := pkey{w.Partition, w.ScopeKey}, peerID{w.ActorID, w.ClientID}
	if len(w.Doc) == 0 {
		if en := p.entries[pk][id]; en != nil && en.owner == nil && en.node == w.Node {
			h.removeLocked(pk, id)
			h.fanLocal(pk, nil, &realtime.PresenceFanout{ScopeKey: pk.scope, Kind: realtime.PresenceLeave, ActorID: id.actor, ClientID: id.client})
		}
		return
	}
	v, err := canonjson.Parse(w.Doc)
	doc, ok := v.(*canonjson.Object)
	if err != nil || !ok {
		h.log.Warn("presence event with a malformed document ignored")
		return
	}
	kind := h.storeLocked(pk, id, &presenceEntry{doc: doc, node: w.Node})
	h.fanLocal(pk, nil, &realtime.PresenceFanout{ScopeKey: pk.scope, Kind: kind, ActorID: id.actor, ClientID: id.client, Doc: doc})
}

// Maintain keeps presence across nodes true until ctx ends: every third
// of the lease it renews this node's lease on the other nodes while it
// holds documents, and drops the documents of nodes not heard from for a
// whole lease (they crashed or lost the fanout: no leave will come). It
// returns at once without a fanout.
func (h *Hub) Maintain(ctx context.Context) {
	if h.o.Fanout == nil {
		return
	}
	for h.o.Sleep(ctx, h.o.PresenceLease/3) == nil {
		h.presenceTick()
	}
}

func (h *Hub) presenceTick() {
	p := &h.pres
	p.mu.Lock()
	defer p.mu.Unlock()
	now, lease := h.nowMs(), h.o.PresenceLease.Milliseconds()
	own := false
	for pk, m := range p.entries {
		for id, en := range m {
			if en.owner != nil {
				own = true
				continue
			}
			if now-p.heard[en.node] > lease {
				h.removeLocked(pk, id)
				h.fanLocal(pk, nil, &realtime.PresenceFanout{ScopeKey: pk.scope, Kind: realtime.PresenceLeave, ActorID: id.actor, ClientID: id.client})
				h.count(PresenceExpired)
			}
		}
	}
	for node, at := range p.heard {
		if now-at > lease {
			delete(p.heard, node)
		}
	}
	if own {
		p.out.push(h, ports.FanoutEvent{Topic: TopicPresence, Key: "", Payload: encodePresence(presenceWire{Node: h.node, Beat: true})})
	}
}

// presenceGone tells the other nodes that this one stopped, after the
// leaves of its sessions, and waits for the queue to be published.
func (h *Hub) presenceGone(ctx context.Context) {
	if h.o.Fanout == nil {
		return
	}
	h.pres.mu.Lock()
	h.pres.out.push(h, ports.FanoutEvent{Topic: TopicPresence, Key: "", Payload: encodePresence(presenceWire{Node: h.node, Gone: true})})
	h.pres.mu.Unlock()
	h.pres.out.flush(ctx)
}

// eventQueue publishes presence events in order without blocking the
// sessions: the first push starts a drainer that runs until it is empty.
type eventQueue struct {
	mu      sync.Mutex
	q       []ports.FanoutEvent
	running bool
	idle    chan struct{} // closed when the drainer stops; nil when idle
}

func (q *eventQueue) push(h *Hub, e ports.FanoutEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.q) >= presenceQueueCap {
		h.log.Warn("presence event dropped: the fanout is not keeping up")
		return
	}
	q.q = append(q.q, e)
	if q.running {
		return
	}
	q.running = true
	q.idle = make(chan struct{})
	go q.drain(h)
}

func (q *eventQueue) drain(h *Hub) {
	for {
		q.mu.Lock()
		if len(q.q) == 0 {
			q.running = false
			close(q.idle)
			q.idle = nil
			q.mu.Unlock()
			return
		}
		e := q.q[0]
		q.q[0] = ports.FanoutEvent{}
		q.q = q.q[1:]
		q.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), h.o.WriteTimeout)
		err := h.o.Fanout.PublishEvent(ctx, e)
		cancel()
		if err != nil {
			h.log.Warn("presence event not published; other nodes learn it from the next change", zap.Error(err))
		}
	}
}

// flush waits until the queued events are published, or ctx ends.
func (q *eventQueue) flush(ctx context.Context) {
	q.mu.Lock()
	idle := q.idle
	q.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

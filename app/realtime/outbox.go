package realtime

import (
	"context"
	"errors"
	"sync"

	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/ports"
)

// item is one queued outbound message.
type item struct {
	msg  ports.RealtimeMessage
	wake realtime.WakeReason // set for a wake-up, which later ones coalesce into
	// pres is set for a presence delivery, which later ones about the same
	// peer on the same key coalesce into; pkey names that pair. known says
	// whether the receiver knew the peer before the first of them.
	pres  *realtime.PresenceFanout
	pkey  string
	known bool
	// state marks a delivery of the room's state (the join burst of a key
	// the socket gains): bounded by the room, not counted as piling up.
	state bool
	dead  bool // coalesced away (a join and its leave): skipped, no bytes
}

// outbox is a session's bounded send queue, drained by one writer. Every
// queued byte counts against the socket's bound and the node's send
// budget. Deltas that do not fit are refused (the session answers with a
// wake-up), round chunks wait for room (backpressure on the response
// stream), and control messages are queued while they fit in the socket's
// bound plus a quarter: past that the client is not reading, and the
// session closes it. The join burst of a key the socket gains is the
// room's state, bounded by the room: it is queued whatever its size and
// not counted against that bound. Control messages coalesce while
// queued: a wake-up absorbs later ones of the same reason, a presence
// delivery later ones about the same peer on the same key, so a client
// that reads slowly holds one message per peer, not one per publish.
type outbox struct {
	max    int
	budget *sendBudget

	mu     sync.Mutex
	items  []item
	taken  int64            // items taken so far: items[i] is number taken+i
	pidx   map[string]int64 // queued presence deliveries by key, by number
	bytes  int
	state  int // bytes of queued state deliveries (not counted as piling up)
	closed bool
	ready  chan struct{} // signalled when items were added
	room   chan struct{} // signalled when bytes were taken
}

var errClosed = errors.New("realtime: session closed")

func newOutbox(max int, budget *sendBudget) *outbox {
	return &outbox{max: max, budget: budget, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// controlMax is the queue bound for control messages: they get a quarter
// more than binary ones, so a wake-up or a heartbeat still fits behind a
// full queue of deltas or round chunks.
func (o *outbox) controlMax() int { return o.max + o.max/4 }

// control queues a text message (hello, wake-ups, heartbeats, presence
// errors). False means the queue overflowed: the client is not reading.
func (o *outbox) control(text []byte, wake realtime.WakeReason) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return true
	}
	if wake != "" {
		for _, it := range o.items {
			if it.wake == wake && !it.dead {
				return true // coalesced into the queued one
			}
		}
	}
	if o.piled()+len(text) > o.controlMax() {
		return false
	}
	o.appendLocked(item{msg: ports.RealtimeMessage{Data: text}, wake: wake})
	return true
}

// piled is what counts against the control bound: all but the state.
func (o *outbox) piled() int { return o.bytes - o.state }

// presence queues a presence delivery about (f.ActorID, f.ClientID) on
// f.ScopeKey, merged into one still queued about the same peer and key;
// state marks the join burst of a key gained. False means the queue
// overflowed.
func (o *outbox) presence(f *realtime.PresenceFanout, state bool) bool {
	key := f.ScopeKey + "\x00" + f.ActorID + "\x00" + f.ClientID
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return true
	}
	if n, ok := o.pidx[key]; ok {
		it := &o.items[n-o.taken]
		merged := mergePresence(it.known, f)
		if merged == nil {
			// The receiver never heard of this peer: it need not.
			o.dropLocked(it)
			delete(o.pidx, key)
			return true
		}
		text, err := realtime.Encode(merged)
		if err != nil {
			return true
		}
		d := len(text) - len(it.msg.Data)
		if !it.state && d > 0 && o.piled()+d > o.controlMax() {
			return false
		}
		o.bytes += d
		if it.state {
			o.state += d
		}
		if d >= 0 {
			o.budget.charge(d)
		} else {
			o.budget.release(-d)
			signal(o.room)
		}
		it.msg.Data, it.pres = text, merged
		return true
	}
	text, err := realtime.Encode(f)
	if err != nil {
		return true
	}
	if !state && o.piled()+len(text) > o.controlMax() {
		return false
	}
	if o.pidx == nil {
		o.pidx = map[string]int64{}
	}
	o.pidx[key] = o.taken + int64(len(o.items))
	if state {
		o.state += len(text)
	}
	o.appendLocked(item{msg: ports.RealtimeMessage{Data: text}, pres: f, pkey: key,
		known: f.Kind != realtime.PresenceJoin, state: state})
	return true
}

// mergePresence is what the receiver must be told once a later delivery
// about the same peer and key joins a queued one: the peer's latest state
// (present with its latest document, or gone), said as a change from what
// the receiver knew before the queued one (known): a join when it did not
// know the peer, an update or a leave when it did, and nothing (nil) when
// a peer it never knew is gone again.
func mergePresence(known bool, next *realtime.PresenceFanout) *realtime.PresenceFanout {
	m := *next
	switch {
	case next.Kind == realtime.PresenceLeave && !known:
		return nil
	case next.Kind == realtime.PresenceLeave:
		return &m
	case known:
		m.Kind = realtime.PresenceUpdate
	default:
		m.Kind = realtime.PresenceJoin
	}
	return &m
}

// dropLocked makes a queued item dead, giving its bytes back.
func (o *outbox) dropLocked(it *item) {
	o.bytes -= len(it.msg.Data)
	if it.state {
		o.state -= len(it.msg.Data)
	}
	o.budget.release(len(it.msg.Data))
	*it = item{dead: true}
	signal(o.room)
}

// offer queues a binary message if it fits the socket's bound and the
// node's budget; false means it was not queued.
func (o *outbox) offer(b []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || (o.bytes > 0 && o.bytes+len(b) > o.max) || !o.budget.fits(len(b)) {
		return false
	}
	o.appendLocked(item{msg: ports.RealtimeMessage{Binary: true, Data: b}})
	return true
}

// wait blocks until a binary message of n bytes fits, or ctx ends.
func (o *outbox) wait(ctx context.Context, n int) error {
	for {
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return errClosed
		}
		fits := o.bytes == 0 || o.bytes+n <= o.max
		o.mu.Unlock()
		var budgetRoom <-chan struct{}
		if fits {
			if budgetRoom = o.budget.wait(n); budgetRoom == nil {
				return nil
			}
		}
		select {
		case <-o.room:
		case <-budgetRoom:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// put queues a binary message unconditionally (after wait made room).
func (o *outbox) put(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.appendLocked(item{msg: ports.RealtimeMessage{Binary: true, Data: b}})
}

func (o *outbox) appendLocked(it item) {
	o.items = append(o.items, it)
	o.bytes += len(it.msg.Data)
	o.budget.charge(len(it.msg.Data))
	signal(o.ready)
}

// take removes the next message, waiting for one until ctx ends.
func (o *outbox) take(ctx context.Context) (ports.RealtimeMessage, error) {
	for {
		o.mu.Lock()
		for len(o.items) > 0 {
			it := o.items[0]
			o.items[0] = item{}
			o.items = o.items[1:]
			o.taken++
			if it.dead {
				continue
			}
			if it.pkey != "" {
				delete(o.pidx, it.pkey)
			}
			if it.state {
				o.state -= len(it.msg.Data)
			}
			o.bytes -= len(it.msg.Data)
			o.mu.Unlock()
			o.budget.release(len(it.msg.Data))
			signal(o.room)
			return it.msg, nil
		}
		closed := o.closed
		o.mu.Unlock()
		if closed {
			return ports.RealtimeMessage{}, errClosed
		}
		select {
		case <-o.ready:
		case <-ctx.Done():
			return ports.RealtimeMessage{}, ctx.Err()
		}
	}
}

// close ends the queue: writers are refused, what is still queued is
// dropped and its bytes return to the node's budget.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	n := o.bytes
	o.items, o.pidx, o.bytes, o.state = nil, nil, 0, 0
	o.mu.Unlock()
	o.budget.release(n)
	signal(o.ready)
	signal(o.room)
}

// sendBudget bounds the bytes queued on all of a node's sockets together:
// a socket's own bound times an unbounded number of sockets is no bound.
// Control messages are charged but never refused by it (they are small
// and coalesced, and the socket's own bound closes a client that lets
// them pile up); deltas that find no room become wake-ups and round
// chunks wait for it. A nil budget bounds nothing.
type sendBudget struct {
	max int64

	mu      sync.Mutex
	used    int64
	room    chan struct{} // closed (and replaced) when bytes are released while waited on
	waiting bool
}

func newSendBudget(max int64) *sendBudget {
	if max <= 0 {
		return nil
	}
	return &sendBudget{max: max, room: make(chan struct{})}
}

// fits reports whether n more bytes fit (anything fits an empty budget).
func (b *sendBudget) fits(n int) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used == 0 || b.used+int64(n) <= b.max
}

// wait returns nil when n bytes fit now, else a channel closed when some
// bytes are released.
func (b *sendBudget) wait(n int) <-chan struct{} {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == 0 || b.used+int64(n) <= b.max {
		return nil
	}
	b.waiting = true
	return b.room
}

func (b *sendBudget) charge(n int) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used += int64(n)
	b.mu.Unlock()
}

func (b *sendBudget) release(n int) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= int64(n)
	if b.waiting {
		close(b.room)
		b.room, b.waiting = make(chan struct{}), false
	}
	b.mu.Unlock()
}

// Used is the bytes queued on the node's sockets (0 without a budget).
func (b *sendBudget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

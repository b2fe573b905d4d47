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
	// peer on the same key coalesce into; pkey names that pair.
	pres *realtime.PresenceFanout
	pkey string
	dead bool // coalesced away (a join and its leave): skipped, no bytes
}

// outbox is a session's bounded send queue, drained by one writer. Every
// queued byte counts against the socket's bound and the node's send
// budget. Deltas that do not fit are refused (the session answers with a
// wake-up), round chunks wait for room (backpressure on the response
// stream), and control messages are queued while they fit in the socket's
// bound plus a quarter: past that the client is not reading, and the
// session closes it. Control messages coalesce while queued: a wake-up
// absorbs later ones of the same reason, a presence delivery later ones
// about the same peer on the same key, so a client that reads slowly
// holds one message per peer, not one per publish.
type outbox struct {
	max    int
	budget *sendBudget

	mu     sync.Mutex
	items  []item
	taken  int64            // items taken so far: items[i] is number taken+i
	pidx   map[string]int64 // queued presence deliveries by key, by number
	bytes  int
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
	if o.bytes+len(text) > o.controlMax() {
		return false
	}
	o.appendLocked(item{msg: ports.RealtimeMessage{Data: text}, wake: wake})
	return true
}

// presence queues a presence delivery about (f.ActorID, f.ClientID) on
// f.ScopeKey, merged into one still queued about the same peer and key.
// False means the queue overflowed.
func (o *outbox) presence(f *realtime.PresenceFanout) bool {
	key := f.ScopeKey + "\x00" + f.ActorID + "\x00" + f.ClientID
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return true
	}
	if n, ok := o.pidx[key]; ok {
		it := &o.items[n-o.taken]
		merged, keep := mergePresence(it.pres, f)
		if !keep {
			// The receiver never heard of this peer: it need not.
			o.bytes -= len(it.msg.Data)
			o.budget.release(len(it.msg.Data))
			*it = item{dead: true}
			delete(o.pidx, key)
			return true
		}
		text, err := realtime.Encode(merged)
		if err != nil {
			return true
		}
		if o.bytes-len(it.msg.Data)+len(text) > o.controlMax() {
			return false
		}
		if d := len(text) - len(it.msg.Data); d >= 0 {
			o.budget.charge(d)
		} else {
			o.budget.release(-d)
		}
		o.bytes += len(text) - len(it.msg.Data)
		it.msg.Data, it.pres = text, merged
		return true
	}
	text, err := realtime.Encode(f)
	if err != nil {
		return true
	}
	if o.bytes+len(text) > o.controlMax() {
		return false
	}
	if o.pidx == nil {
		o.pidx = map[string]int64{}
	}
	o.pidx[key] = o.taken + int64(len(o.items))
	o.appendLocked(item{msg: ports.RealtimeMessage{Data: text}, pres: f, pkey: key})
	return true
}

// mergePresence folds a later delivery about the same peer and key into
// a queued one, as the receiver would have applied both: the latest
// document wins, a join stays a join (the receiver has not seen the peer
// yet), and a join followed by a leave is nothing (keep false).
func mergePresence(queued, next *realtime.PresenceFanout) (merged *realtime.PresenceFanout, keep bool) {
	switch {
	case queued.Kind == realtime.PresenceJoin && next.Kind == realtime.PresenceLeave:
		return nil, false
	case queued.Kind == realtime.PresenceJoin, queued.Kind == realtime.PresenceLeave && next.Kind != realtime.PresenceLeave:
		// A leave then a join is the peer back with a new document: a
		// join sets it whatever the receiver holds.
		m := *next
		m.Kind = realtime.PresenceJoin
		return &m, true
	}
	return next, true
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
	o.items, o.pidx, o.bytes = nil, nil, 0
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

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
}

// outbox is a session's bounded send queue, drained by one writer. Deltas
// that do not fit are refused (the session answers with a wake-up), round
// chunks wait for room (backpressure on the response stream), and a
// wake-up still queued absorbs later ones of the same reason.
type outbox struct {
	max int

	mu     sync.Mutex
	items  []item
	bytes  int
	closed bool
	ready  chan struct{} // signalled when items were added
	room   chan struct{} // signalled when bytes were taken
}

var errClosed = errors.New("realtime: session closed")

func newOutbox(max int) *outbox {
	return &outbox{max: max, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// control queues a text message; control messages are small and always
// queued (hello, wake-ups, heartbeats).
func (o *outbox) control(text []byte, wake realtime.WakeReason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	if wake != "" {
		for _, it := range o.items {
			if it.wake == wake {
				return // coalesced into the queued one
			}
		}
	}
	o.items = append(o.items, item{msg: ports.RealtimeMessage{Data: text}, wake: wake})
	o.bytes += len(text)
	signal(o.ready)
}

// offer queues a binary message if it fits; false means it was not queued.
func (o *outbox) offer(b []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || (o.bytes > 0 && o.bytes+len(b) > o.max) {
		return false
	}
	o.items = append(o.items, item{msg: ports.RealtimeMessage{Binary: true, Data: b}})
	o.bytes += len(b)
	signal(o.ready)
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
		if fits {
			return nil
		}
		select {
		case <-o.room:
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
	o.items = append(o.items, item{msg: ports.RealtimeMessage{Binary: true, Data: b}})
	o.bytes += len(b)
	signal(o.ready)
}

// take removes the next message, waiting for one until ctx ends.
func (o *outbox) take(ctx context.Context) (ports.RealtimeMessage, error) {
	for {
		o.mu.Lock()
		if len(o.items) > 0 {
			it := o.items[0]
			o.items[0] = item{}
			o.items = o.items[1:]
			o.bytes -= len(it.msg.Data)
			o.mu.Unlock()
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

// close ends the queue: writers are refused, the drain sees errClosed
// once the queued messages are taken.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	signal(o.ready)
	signal(o.room)
}

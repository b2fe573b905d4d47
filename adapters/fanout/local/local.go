// Package local is the in-process ports.Fanout: one node (SQLite, or
// PostgreSQL with a single server) where everything published reaches the
// listeners of this process only. The PostgreSQL fanout uses it too, to
// deliver what its listener connection hears.
//
// Delivery rule: every listener has its own goroutine and a bounded queue,
// so a publisher never waits for a handler. When a queue is full, its
// commit notices are coalesced per partition to the highest seq (a notice
// only wakes, so the highest one says everything the others said). If that
// frees less than a quarter of the queue, everything queued is dropped and
// the listener gets Resync instead (its sessions catch up from storage),
// so a slow handler costs catch-ups, never memory or a blocked push.
// Events dropped that way are lost, like any event (they are not durable).
package local

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/ports"
)

// Defaults and bounds of Options.
const (
	// DefaultQueueSize is how many notices and events wait per listener.
	DefaultQueueSize = 1024
	// DefaultMaxEventBytes is the event payload cap: the PostgreSQL
	// fanout carries the same, so a deployment behaves alike on one node
	// and on several.
	DefaultMaxEventBytes = 64 << 10
	// MaxTopicBytes and MaxKeyBytes bound an event's topic and key.
	MaxTopicBytes = 256
	MaxKeyBytes   = 1024
)

// Options configure New.
type Options struct {
	// QueueSize bounds each listener's queue (0: DefaultQueueSize).
	QueueSize int
	// MaxEventBytes caps event payloads (0: DefaultMaxEventBytes).
	MaxEventBytes int
	// Log reports overflows; nil logs nothing.
	Log *zap.Logger
}

// Fanout delivers in process. It is safe for concurrent use.
type Fanout struct {
	queueSize int
	maxEvent  int
	log       *zap.Logger

	mu        sync.Mutex
	closed    bool
	listeners map[*listener]struct{}

	overflows atomic.Int64
}

var _ ports.Fanout = (*Fanout)(nil)

// New returns an in-process fanout with no listeners.
func New(o Options) *Fanout {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = DefaultMaxEventBytes
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Fanout{queueSize: o.QueueSize, maxEvent: o.MaxEventBytes, log: o.Log,
		listeners: map[*listener]struct{}{}}
}

// CheckEvent refuses an event the fanouts do not carry: a payload over
// maxPayload bytes, a topic or key over their bounds.
func CheckEvent(e ports.FanoutEvent, maxPayload int) error {
	switch {
	case len(e.Payload) > maxPayload:
		return fmt.Errorf("%w: payload %d bytes, at most %d", ports.ErrFanoutEventTooLarge, len(e.Payload), maxPayload)
	case len(e.Topic) > MaxTopicBytes:
		return fmt.Errorf("%w: topic %d bytes, at most %d", ports.ErrFanoutEventTooLarge, len(e.Topic), MaxTopicBytes)
	case len(e.Key) > MaxKeyBytes:
		return fmt.Errorf("%w: key %d bytes, at most %d", ports.ErrFanoutEventTooLarge, len(e.Key), MaxKeyBytes)
	}
	return nil
}

// PublishCommit queues n for every listener.
func (f *Fanout) PublishCommit(_ context.Context, n ports.CommitNotice) error {
	return f.dispatch(item{commit: true, notice: n})
}

// PublishEvent queues e for every listener; e.Payload is copied.
func (f *Fanout) PublishEvent(_ context.Context, e ports.FanoutEvent) error {
	if err := CheckEvent(e, f.maxEvent); err != nil {
		return err
	}
	e.Payload = append([]byte(nil), e.Payload...)
	return f.dispatch(item{event: e})
}

// MaxEventBytes is the payload cap of Options.MaxEventBytes.
func (f *Fanout) MaxEventBytes() int { return f.maxEvent }

// Resync makes every current listener call Resync (after what is already
// queued for it), for a fanout whose source may have lost notices.
func (f *Fanout) Resync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.listeners {
		l.requestResync()
	}
}

// Listeners returns how many listeners are registered.
func (f *Fanout) Listeners() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.listeners)
}

// Overflows counts the queue overflows that ended in a Resync.
func (f *Fanout) Overflows() int64 { return f.overflows.Load() }

// Listen registers h; see ports.Fanout.
func (f *Fanout) Listen(ctx context.Context, h ports.FanoutHandler) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &listener{f: f, h: h, wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{})}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, ports.ErrFanoutClosed
	}
	f.listeners[l] = struct{}{}
	f.mu.Unlock()
	go l.run()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				l.stop(false)
			case <-l.done:
			}
		}()
	}
	return func() { l.stop(true) }, nil
}

// Close stops every listener and refuses further use.
func (f *Fanout) Close() error {
	f.mu.Lock()
	f.closed = true
	ls := make([]*listener, 0, len(f.listeners))
	for l := range f.listeners {
		ls = append(ls, l)
	}
	f.mu.Unlock()
	for _, l := range ls {
		l.stop(true)
	}
	return nil
}

func (f *Fanout) dispatch(it item) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ports.ErrFanoutClosed
	}
	for l := range f.listeners {
		l.enqueue(it)
	}
	return nil
}

type item struct {
	commit bool
	notice ports.CommitNotice
	event  ports.FanoutEvent
}

type listener struct {
	f *Fanout
	h ports.FanoutHandler

	mu     sync.Mutex
	queue  []item
	resync bool

	wake     chan struct{}
	stopOnce sync.Once
	stopped  atomic.Bool
	done     chan struct{}
	exited   chan struct{}
}

// enqueue adds it to the queue, coalescing or dropping on overflow (see
// the package comment). Called with f.mu held, never blocks.
func (l *listener) enqueue(it item) {
	l.mu.Lock()
	if len(l.queue) >= l.f.queueSize {
		l.queue = coalesce(l.queue)
		if len(l.queue) > l.f.queueSize*3/4 {
			dropped := len(l.queue)
			l.queue = nil
			l.resync = true
			l.f.overflows.Add(1)
			l.f.log.Warn("fanout listener overflowed: queue dropped, sessions resync",
				zap.Int("dropped", dropped))
		}
	}
	l.queue = append(l.queue, it)
	l.mu.Unlock()
	l.signal()
}

func (l *listener) requestResync() {
	l.mu.Lock()
	l.resync = true
	l.mu.Unlock()
	l.signal()
}

func (l *listener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// coalesce keeps one commit notice per partition, at its first position,
// with the highest seq queued; events keep their order.
func coalesce(q []item) []item {
	at := map[string]int{}
	out := q[:0]
	for _, it := range q {
		if it.commit {
			if i, ok := at[it.notice.Partition]; ok {
				if it.notice.CommitSeq > out[i].notice.CommitSeq {
					out[i].notice.CommitSeq = it.notice.CommitSeq
				}
				continue
			}
			at[it.notice.Partition] = len(out)
		}
		out = append(out, it)
	}
	clear(q[len(out):])
	return out
}

func (l *listener) run() {
	defer close(l.exited)
	for {
		select {
		case <-l.done:
			return
		case <-l.wake:
		}
		for {
			l.mu.Lock()
			resync, batch := l.resync, l.queue
			l.resync, l.queue = false, nil
			l.mu.Unlock()
			if !resync && len(batch) == 0 {
				break
			}
			if resync {
				if l.stopped.Load() {
					return
				}
				l.h.Resync()
			}
			for _, it := range batch {
				if l.stopped.Load() {
					return
				}
				if it.commit {
					l.h.Commit(it.notice)
				} else {
					l.h.Event(it.event)
				}
			}
		}
	}
}

// stop unregisters the listener; with wait it returns once the handler
// call in progress (if any) has returned.
func (l *listener) stop(wait bool) {
	l.stopOnce.Do(func() {
		l.stopped.Store(true)
		l.f.mu.Lock()
		delete(l.f.listeners, l)
		l.f.mu.Unlock()
		close(l.done)
	})
	if wait {
		<-l.exited
	}
}

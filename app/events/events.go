// Package events delivers the operational events of domain/event to the
// hooks an embedding host registered and to the log, off the request
// path.
//
// Every subscriber (each hook, and the log when it enables debug) has a
// bounded queue and a delivery goroutine of its own. Emit assigns the
// event its sequence number and time and offers it to every queue without
// waiting: a full queue drops the event for that subscriber alone and
// counts it. Delivery is in emission order for every subscriber; a hook
// that panics is recovered and counted, and the next event is delivered.
// Stop delivers what is queued, within a bound, then cancels the hooks'
// context.
package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/ports"
)

// Defaults.
const (
	DefaultQueueSize    = 4096
	DefaultDrainTimeout = 2 * time.Second
)

// Options configure a Dispatcher.
type Options struct {
	// Hooks are the host's receivers, in registration order.
	Hooks []ports.EventHook
	// Log gets every event as one debug line (message "event", the kind
	// and the event's fields) when it enables debug; nil or a logger above
	// debug logs none. Failures of the dispatcher itself (a panicking
	// hook) are logged to it at error level either way.
	Log *zap.Logger
	// QueueSize bounds each subscriber's queue (default DefaultQueueSize).
	QueueSize int
	// DrainTimeout bounds how long Stop delivers what is queued (default
	// DefaultDrainTimeout; Stop's context may end it earlier).
	DrainTimeout time.Duration
	// Now stamps each event (default time.Now).
	Now func() time.Time
	// Metrics counts deliveries, drops and panics; nil counts nothing.
	Metrics *Metrics
}

// Dispatcher fans events out to the subscribers. It implements
// ports.EventSink and is safe for concurrent use.
type Dispatcher struct {
	subs  []*subscriber
	now   func() time.Time
	drain time.Duration
	log   *zap.Logger

	// mu orders emission: every subscriber sees the same sequence.
	mu      sync.Mutex
	seq     uint64
	stopped bool

	started   atomic.Bool
	stopOnce  sync.Once
	stopCh    chan struct{}
	hookCtx   context.Context
	cancel    context.CancelFunc
	delivered sync.WaitGroup
}

var _ ports.EventSink = (*Dispatcher)(nil)

type subscriber struct {
	name string
	hook ports.EventHook
	q    chan ports.EventRecord
	c    counters
}

// New builds a stopped dispatcher; Start runs its delivery goroutines.
func New(o Options) *Dispatcher {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	d := &Dispatcher{now: o.Now, drain: o.DrainTimeout, log: o.Log, stopCh: make(chan struct{})}
	d.hookCtx, d.cancel = context.WithCancel(context.Background())
	add := func(name string, h ports.EventHook) {
		d.subs = append(d.subs, &subscriber{name: name, hook: h, q: make(chan ports.EventRecord, o.QueueSize), c: o.Metrics.counters(name)})
	}
	if o.Log.Core().Enabled(zapcore.DebugLevel) {
		add("log", logHook{o.Log})
	}
	for i, h := range o.Hooks {
		if h != nil {
			add(hookName(i, h), h)
		}
	}
	return d
}

// hookName labels a hook's counters: its EventHookName when it has one,
// else its position among the host's hooks.
func hookName(i int, h ports.EventHook) string {
	if n, ok := h.(interface{ EventHookName() string }); ok && n.EventHookName() != "" {
		return n.EventHookName()
	}
	return fmt.Sprintf("hook_%d", i)
}

// Active reports whether anything listens: a host hook, or the log at
// debug. An inactive dispatcher need not be handed to the use cases.
func (d *Dispatcher) Active() bool { return d != nil && len(d.subs) > 0 }

// Emit offers e to every subscriber's queue without waiting; a full
// queue, or a stopped dispatcher, drops it for that subscriber (counted).
func (d *Dispatcher) Emit(e event.Event) {
	if d == nil || len(d.subs) == 0 || e == nil {
		return
	}
	at := d.now()
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		for _, s := range d.subs {
			s.c.dropped.Inc()
		}
		return
	}
	d.seq++
	r := ports.EventRecord{Seq: d.seq, At: at, Event: e}
	for _, s := range d.subs {
		select {
		case s.q <- r:
		default:
			s.c.dropped.Inc()
		}
	}
	d.mu.Unlock()
}

// Start runs one delivery goroutine per subscriber; it returns at once.
// Events emitted before Start wait in the queues.
func (d *Dispatcher) Start() {
	if d == nil || !d.started.CompareAndSwap(false, true) {
		return
	}
	for _, s := range d.subs {
		d.delivered.Add(1)
		go d.run(s)
	}
}

// Stop refuses further events, delivers what is queued within the drain
// bound (or until ctx ends), then cancels the hooks' context. It returns
// an error naming the subscribers still busy when the bound passed; their
// goroutines end when their hook returns.
func (d *Dispatcher) Stop(ctx context.Context) error {
	if d == nil {
		return nil
	}
	var err error
	d.stopOnce.Do(func() {
		d.mu.Lock()
		d.stopped = true
		d.mu.Unlock()
		close(d.stopCh)
		defer d.cancel()
		if !d.started.Load() {
			return
		}
		done := make(chan struct{})
		go func() { d.delivered.Wait(); close(done) }()
		t := time.NewTimer(d.drain)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			err = errors.New("events: hooks still delivering after the drain bound")
		case <-ctx.Done():
			err = fmt.Errorf("events: drain cut short: %w", ctx.Err())
		}
	})
	return err
}

func (d *Dispatcher) run(s *subscriber) {
	defer d.delivered.Done()
	for {
		select {
		case r := <-s.q:
			d.deliver(s, r)
		case <-d.stopCh:
			// Drain what was queued before the stop; nothing is added
			// after it.
			for {
				select {
				case r := <-s.q:
					if d.hookCtx.Err() != nil {
						return
					}
					d.deliver(s, r)
				default:
					return
				}
			}
		}
	}
}

// deliver runs one hook call; a panic is recovered and counted, so the
// next event is delivered and the server never crashes for a hook.
func (d *Dispatcher) deliver(s *subscriber, r ports.EventRecord) {
	defer func() {
		if p := recover(); p != nil {
			s.c.panics.Inc()
			d.log.Error("event hook panicked; the event is lost for it", zap.String("hook", s.name),
				zap.String("kind", string(r.Event.Kind())), zap.Uint64("event_seq", r.Seq), zap.Any("panic", p))
		}
	}()
	s.hook.HandleEvent(d.hookCtx, r)
	s.c.delivered.Inc()
}

// logHook writes each event as one debug line.
type logHook struct{ log *zap.Logger }

func (l logHook) HandleEvent(_ context.Context, r ports.EventRecord) {
	l.log.Debug("event", zap.String("kind", string(r.Event.Kind())), zap.Uint64("event_seq", r.Seq),
		zap.Inline(Fields(r.Event)))
}

// Fields renders an event's fields as a zap object (zap.Inline(Fields(e))
// puts them on the line itself).
func Fields(e event.Event) zapcore.ObjectMarshaler { return fieldsOf{e} }

type fieldsOf struct{ e event.Event }

func (f fieldsOf) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	f.e.EncodeFields(enc)
	return nil
}

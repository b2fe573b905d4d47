package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/app/events"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/ports"
)

// recorder keeps what a hook received.
type recorder struct {
	mu   sync.Mutex
	got  []ports.EventRecord
	each func(ports.EventRecord)
}

func (r *recorder) HandleEvent(_ context.Context, rec ports.EventRecord) {
	if r.each != nil {
		r.each(rec)
	}
	r.mu.Lock()
	r.got = append(r.got, rec)
	r.mu.Unlock()
}

func (r *recorder) records() []ports.EventRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ports.EventRecord(nil), r.got...)
}

func pushed(client string, seq int64) event.Event {
	return event.PushApplied{Who: event.Who{Partition: "p", ClientID: client}, CommitSeq: seq}
}

func newMetrics(t *testing.T) (*events.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := events.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// value reads syncd_events_<name>_total{hook} from reg (0 when absent).
func value(t *testing.T, reg *prometheus.Registry, name, hook string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "syncd_events_"+name+"_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "hook" && l.GetValue() == hook {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func stop(t *testing.T, d *events.Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// Each emitter's events reach every hook in the order it emitted them,
// and every hook sees one sequence: the same events in the same order,
// numbered 1, 2, … without gaps when nothing was dropped.
func TestEveryHookSeesEachEmittersEventsInOrder(t *testing.T) {
	a, b := &recorder{}, &recorder{}
	d := events.New(events.Options{Hooks: []ports.EventHook{a, b}, QueueSize: 10000})
	d.Start()
	const emitters, each = 8, 500
	var wg sync.WaitGroup
	for e := range emitters {
		wg.Go(func() {
			for i := range each {
				d.Emit(pushed(string(rune('a'+e)), int64(i)))
			}
		})
	}
	wg.Wait()
	stop(t, d)
	ra, rb := a.records(), b.records()
	if len(ra) != emitters*each || len(rb) != len(ra) {
		t.Fatalf("delivered %d and %d events, want %d each", len(ra), len(rb), emitters*each)
	}
	last := map[string]int64{}
	for i, r := range ra {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
		if rb[i].Seq != r.Seq || rb[i].Event != r.Event {
			t.Fatalf("hooks disagree at %d: %+v vs %+v", i, r, rb[i])
		}
		p := r.Event.(event.PushApplied)
		if prev, ok := last[p.ClientID]; ok && p.CommitSeq != prev+1 {
			t.Fatalf("emitter %s: %d after %d", p.ClientID, p.CommitSeq, prev)
		}
		last[p.ClientID] = p.CommitSeq
	}
}

// A hook that does not keep up loses events from its own full queue:
// Emit never waits for it, the drops are counted, and the other hooks
// get everything.
func TestFullQueueDropsForThatHookOnlyAndNeverBlocks(t *testing.T) {
	m, reg := newMetrics(t)
	release, took := make(chan struct{}), make(chan struct{}, 1)
	slow := &recorder{each: func(ports.EventRecord) {
		select {
		case took <- struct{}{}:
		default:
		}
		<-release
	}}
	fast := &recorder{}
	d := events.New(events.Options{Hooks: []ports.EventHook{slow, fast}, QueueSize: 4, Metrics: m})
	d.Start()
	done := make(chan struct{})
	go func() {
		for i := range 100 {
			d.Emit(pushed("c", int64(i)))
			if i == 0 {
				// Let the slow hook take the first event, so exactly
				// QueueSize more fit behind it.
				<-took
			}
			// The fast hook keeps up (its queue is as small).
			if !until(func() bool { return len(fast.records()) == i+1 }) {
				break
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Emit blocked on a slow hook")
	}
	waitFor(t, func() bool { return len(fast.records()) == 100 })
	close(release)
	stop(t, d)
	if n := len(slow.records()); n != 1+4 {
		t.Fatalf("slow hook got %d events, want the one it held and a queue of 4", n)
	}
	if got := value(t, reg, "dropped", "hook_0"); got != 95 {
		t.Fatalf("dropped for the slow hook = %v, want 95", got)
	}
	if got := value(t, reg, "dropped", "hook_1"); got != 0 {
		t.Fatalf("dropped for the fast hook = %v, want 0", got)
	}
	// The slow hook sees the gap in the sequence.
	if r := slow.records(); r[len(r)-1].Seq != 5 {
		t.Fatalf("slow hook's last seq %d, want 5", r[len(r)-1].Seq)
	}
}

// A hook that panics is recovered and counted; it gets the next event,
// and the other hooks never notice.
func TestPanickingHookIsRecoveredAndCounted(t *testing.T) {
	m, reg := newMetrics(t)
	obs, logs := observer.New(zap.ErrorLevel)
	bad := &recorder{each: func(r ports.EventRecord) {
		if r.Seq%2 == 1 {
			panic("host bug")
		}
	}}
	good := &recorder{}
	d := events.New(events.Options{Hooks: []ports.EventHook{bad, good}, Metrics: m, Log: zap.New(obs)})
	d.Start()
	for i := range 6 {
		d.Emit(pushed("c", int64(i)))
	}
	stop(t, d)
	if got := value(t, reg, "hook_panics", "hook_0"); got != 3 {
		t.Fatalf("panics = %v, want 3", got)
	}
	if n := len(bad.records()); n != 3 {
		t.Fatalf("panicking hook completed %d calls, want the 3 even ones", n)
	}
	if n := len(good.records()); n != 6 {
		t.Fatalf("other hook got %d events, want 6", n)
	}
	if got := value(t, reg, "delivered", "hook_1"); got != 6 {
		t.Fatalf("delivered to the other hook = %v, want 6", got)
	}
	if logs.FilterMessage("event hook panicked; the event is lost for it").Len() != 3 {
		t.Fatalf("panics logged: %v", logs.All())
	}
}

// Stop delivers what was queued before it, then refuses (and counts)
// later events.
func TestStopDrainsTheQueueThenDropsLaterEvents(t *testing.T) {
	m, reg := newMetrics(t)
	h := &recorder{}
	d := events.New(events.Options{Hooks: []ports.EventHook{h}, Metrics: m})
	for i := range 50 {
		d.Emit(pushed("c", int64(i))) // queued before Start
	}
	d.Start()
	stop(t, d)
	if n := len(h.records()); n != 50 {
		t.Fatalf("delivered %d of 50 queued events", n)
	}
	d.Emit(pushed("c", 50))
	if got := value(t, reg, "dropped", "hook_0"); got != 1 {
		t.Fatalf("dropped after stop = %v, want 1", got)
	}
	if n := len(h.records()); n != 50 {
		t.Fatalf("an event emitted after Stop was delivered")
	}
}

// A hook still busy when the drain bound passes does not hold the stop:
// Stop returns after the bound with an error, and the hook's context is
// canceled.
func TestStopIsBoundedBySlowHooks(t *testing.T) {
	canceled := make(chan struct{})
	h := ports.EventHookFunc(func(ctx context.Context, _ ports.EventRecord) {
		<-ctx.Done()
		close(canceled)
	})
	d := events.New(events.Options{Hooks: []ports.EventHook{h}, DrainTimeout: 50 * time.Millisecond})
	d.Start()
	d.Emit(pushed("c", 1))
	began := time.Now()
	err := d.Stop(context.Background())
	if err == nil {
		t.Fatal("Stop reported a complete drain past a stuck hook")
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("Stop took %v", took)
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the stuck hook's context was not canceled")
	}
}

// The log is a subscriber when it enables debug: one line per event with
// the kind and the fields; above debug nothing subscribes.
func TestLogGetsEventsAtDebugOnly(t *testing.T) {
	for _, c := range []struct {
		level  zapcore.Level
		active bool
	}{{zap.DebugLevel, true}, {zap.InfoLevel, false}} {
		t.Run(c.level.String(), func(t *testing.T) {
			obs, logs := observer.New(c.level)
			d := events.New(events.Options{Log: zap.New(obs)})
			if d.Active() != c.active {
				t.Fatalf("Active = %v", d.Active())
			}
			d.Start()
			d.Emit(pushed("c9", 7))
			stop(t, d)
			lines := logs.FilterMessage("event").All()
			if !c.active {
				if len(lines) != 0 {
					t.Fatalf("logged %v", lines)
				}
				return
			}
			if len(lines) != 1 {
				t.Fatalf("logged %d lines", len(lines))
			}
			f := lines[0].ContextMap()
			if f["kind"] != "push.applied" || f["client_id"] != "c9" || f["commit_seq"] != int64(7) || f["event_seq"] != uint64(1) {
				t.Fatalf("fields %v", f)
			}
		})
	}
}

func TestNilDispatcherIsInert(t *testing.T) {
	var d *events.Dispatcher
	d.Emit(pushed("c", 1))
	d.Start()
	if d.Active() {
		t.Fatal("nil dispatcher active")
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if !until(cond) {
		t.Fatal("condition not met within 5s")
	}
}

// until polls cond for up to 5 seconds.
func until(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

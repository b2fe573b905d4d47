package contract

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/ports"
)

// FanoutHarness adapts one ports.Fanout implementation to the fanout
// suite (RunFanout).
//
// Cases (TestX/Case): own_node_delivery, exactly_once_own_node,
// peers_hear_each_other, deployments_isolated, event_size_limit,
// stop_ends_delivery, per_partition_order (coalescing allowed, with a
// handler held up), listener_reconnects_and_resyncs.
type FanoutHarness struct {
	// New returns a fanout on a fresh deployment (its own namespace),
	// already able to hear its peers; the harness releases it.
	New func(t *testing.T) ports.Fanout
	// Peer returns another node of f's deployment, already listening; nil
	// for a fanout of one node (the multi-node cases skip).
	Peer func(t *testing.T, f ports.Fanout) ports.Fanout
	// Kill drops f's listener connection; nil when it has none.
	Kill func(t *testing.T, f ports.Fanout)
}

// RunFanout runs the fanout contract against h.
func RunFanout(t *testing.T, h FanoutHarness) {
	if h.New == nil {
		t.Fatal("contract: FanoutHarness.New is required")
	}
	cases := []struct {
		name string
		run  func(t *testing.T, h FanoutHarness)
	}{
		{"own_node_delivery", fanOwnDelivery},
		{"exactly_once_own_node", fanExactlyOnce},
		{"peers_hear_each_other", fanPeers},
		{"deployments_isolated", fanIsolated},
		{"event_size_limit", fanSizeLimit},
		{"stop_ends_delivery", fanStop},
		{"per_partition_order", fanOrder},
		{"listener_reconnects_and_resyncs", fanReconnect},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

// fanWait bounds every wait for a delivery; it only guards against a hang.
const fanWait = 60 * time.Second

// recorder is a FanoutHandler that records what it gets and lets tests
// wait for a condition on it.
type recorder struct {
	mu      sync.Mutex
	commits []ports.CommitNotice
	events  []ports.FanoutEvent
	resyncs int
	changed chan struct{}
	// hold, when set, blocks the first Commit call until it is closed.
	hold    chan struct{}
	holding chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) note() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) Commit(n ports.CommitNotice) {
	r.mu.Lock()
	hold := r.hold
	r.hold = nil
	r.mu.Unlock()
	if hold != nil {
		close(r.holding)
		<-hold
	}
	r.mu.Lock()
	r.commits = append(r.commits, n)
	r.mu.Unlock()
	r.note()
}

func (r *recorder) Event(e ports.FanoutEvent) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	r.note()
}

func (r *recorder) Resync() {
	r.mu.Lock()
	r.resyncs++
	r.mu.Unlock()
	r.note()
}

// wait blocks until cond (called under the lock) holds.
func (r *recorder) wait(t *testing.T, what string, cond func(r *recorder) bool) {
	t.Helper()
	deadline := time.NewTimer(fanWait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok := cond(r)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-deadline.C:
			t.Fatalf("fanout: gave up waiting for %s", what)
		}
	}
}

func (r *recorder) count(partition string, seq int64) int {
	n := 0
	for _, c := range r.commits {
		if c.Partition == partition && c.CommitSeq == seq {
			n++
		}
	}
	return n
}

func (r *recorder) hasEvent(e ports.FanoutEvent) bool {
	for _, got := range r.events {
		if got.Topic == e.Topic && got.Key == e.Key && bytes.Equal(got.Payload, e.Payload) {
			return true
		}
	}
	return false
}

func (r *recorder) snapshot() (commits []ports.CommitNotice, events int, resyncs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ports.CommitNotice(nil), r.commits...), len(r.events), r.resyncs
}

func listen(t *testing.T, f ports.Fanout, r *recorder) func() {
	t.Helper()
	stop, err := f.Listen(context.Background(), r)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(stop)
	return stop
}

func publishCommit(t *testing.T, f ports.Fanout, partition string, seq int64) {
	t.Helper()
	if err := f.PublishCommit(context.Background(), ports.CommitNotice{Partition: partition, CommitSeq: seq}); err != nil {
		t.Fatalf("PublishCommit(%s, %d): %v", partition, seq, err)
	}
}

func publishEvent(t *testing.T, f ports.Fanout, e ports.FanoutEvent) {
	t.Helper()
	if err := f.PublishEvent(context.Background(), e); err != nil {
		t.Fatalf("PublishEvent(%s, %s): %v", e.Topic, e.Key, err)
	}
}

// binaryEvent has a payload no text channel carries verbatim.
func binaryEvent(key string) ports.FanoutEvent {
	return ports.FanoutEvent{Topic: "presence", Key: key,
		Payload: []byte{0, 1, 0xff, ' ', '\n', 0xc3, 0x28, '"', '\\', 0}}
}

// odd partitions: spaces, non-ASCII, NUL and invalid UTF-8 must round-trip.
var fanPartitions = []string{"p1", "tenant a/b c", "größe-✓", "nul\x00inside", "bad\xc3utf8"}

func fanOwnDelivery(t *testing.T, h FanoutHarness) {
	f := h.New(t)
	r := newRecorder()
	listen(t, f, r)
	for i, p := range fanPartitions {
		publishCommit(t, f, p, int64(i+1))
	}
	e := binaryEvent("default\x00scope:key ✓")
	publishEvent(t, f, e)
	r.wait(t, "own commits and event", func(r *recorder) bool {
		for i, p := range fanPartitions {
			if r.count(p, int64(i+1)) == 0 {
				return false
			}
		}
		return r.hasEvent(e)
	})
	if got := f.MaxEventBytes(); got < 1 {
		t.Fatalf("MaxEventBytes %d, want positive", got)
	}
}

// fanExactlyOnce: a node's own notice reaches its listeners once, though
// it also travels through the shared channel.
func fanExactlyOnce(t *testing.T, h FanoutHarness) {
	if h.Peer == nil {
		t.Skip("single-node fanout: own delivery is the only path (own_node_delivery)")
	}
	a := h.New(t)
	b := h.Peer(t, a)
	ra, rb := newRecorder(), newRecorder()
	listen(t, a, ra)
	listen(t, b, rb)
	publishCommit(t, a, "p", 7)
	publishEvent(t, a, binaryEvent("k"))
	// Once b heard a's notices they are in the channel; what b sends now
	// reaches a after any echo of a's own notices would have.
	rb.wait(t, "b hears a", func(r *recorder) bool { return r.count("p", 7) == 1 && r.hasEvent(binaryEvent("k")) })
	publishCommit(t, b, "q", 1)
	ra.wait(t, "a hears b", func(r *recorder) bool { return r.count("q", 1) == 1 })
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if n := ra.count("p", 7); n != 1 {
		t.Fatalf("own notice delivered %d times, want once", n)
	}
	if len(ra.events) != 1 {
		t.Fatalf("own event delivered %d times, want once", len(ra.events))
	}
}

func fanPeers(t *testing.T, h FanoutHarness) {
	if h.Peer == nil {
		t.Skip("single-node fanout")
	}
	a := h.New(t)
	b := h.Peer(t, a)
	c := h.Peer(t, a)
	ra, rb, rc := newRecorder(), newRecorder(), newRecorder()
	listen(t, a, ra)
	listen(t, b, rb)
	listen(t, c, rc)
	for i, p := range fanPartitions {
		publishCommit(t, a, p, int64(100+i))
	}
	e := binaryEvent("from-b")
	publishEvent(t, b, e)
	all := func(r *recorder) bool {
		for i, p := range fanPartitions {
			if r.count(p, int64(100+i)) != 1 {
				return false
			}
		}
		return r.hasEvent(e)
	}
	for name, r := range map[string]*recorder{"a": ra, "b": rb, "c": rc} {
		r.wait(t, "node "+name+" hears every node", all)
	}
}

// fanIsolated: two deployments (namespaces) never hear each other.
func fanIsolated(t *testing.T, h FanoutHarness) {
	one, two := h.New(t), h.New(t)
	// Witnesses hear through the shared channel when there is one (a
	// node's own notices reach it without it).
	witness, hearer := one, two
	if h.Peer != nil {
		witness, hearer = h.Peer(t, one), h.Peer(t, two)
	}
	rw, rtwo := newRecorder(), newRecorder()
	listen(t, witness, rw)
	listen(t, hearer, rtwo)
	publishCommit(t, one, "shared", 1)
	publishEvent(t, one, binaryEvent("shared"))
	rw.wait(t, "deployment one hears itself", func(r *recorder) bool { return r.count("shared", 1) == 1 && len(r.events) == 1 })
	// one's notices are out; two's own notice now arrives after them.
	publishCommit(t, two, "shared", 2)
	rtwo.wait(t, "deployment two hears itself", func(r *recorder) bool { return r.count("shared", 2) == 1 })
	commits, events, _ := rtwo.snapshot()
	if len(commits) != 1 || events != 0 {
		t.Fatalf("deployment two heard %v and %d events from deployment one", commits, events)
	}
}

func fanSizeLimit(t *testing.T, h FanoutHarness) {
	f := h.New(t)
	hearer := f
	if h.Peer != nil {
		hearer = h.Peer(t, f)
	}
	r := newRecorder()
	listen(t, hearer, r)
	limit := f.MaxEventBytes()
	big := ports.FanoutEvent{Topic: "presence", Key: "k", Payload: bytes.Repeat([]byte{0, 0xff, 'x'}, limit/3+1)[:limit+1]}
	err := f.PublishEvent(context.Background(), big)
	if !errors.Is(err, ports.ErrFanoutEventTooLarge) {
		t.Fatalf("PublishEvent(%d bytes) = %v, want ErrFanoutEventTooLarge", len(big.Payload), err)
	}
	fits := big
	fits.Payload = big.Payload[:limit]
	publishEvent(t, f, fits)
	r.wait(t, "an event of exactly MaxEventBytes", func(r *recorder) bool { return r.hasEvent(fits) })
	if _, events, _ := r.snapshot(); events != 1 {
		t.Fatalf("got %d events, want only the one that fits", events)
	}
}

func fanStop(t *testing.T, h FanoutHarness) {
	f := h.New(t)
	pub := f
	if h.Peer != nil {
		pub = h.Peer(t, f)
	}
	stopped, still := newRecorder(), newRecorder()
	stop := listen(t, f, stopped)
	listen(t, f, still)
	publishCommit(t, pub, "p", 1)
	stopped.wait(t, "delivery before stop", func(r *recorder) bool { return r.count("p", 1) == 1 })
	stop()
	stop() // idempotent
	publishCommit(t, pub, "p", 2)
	publishEvent(t, pub, binaryEvent("after"))
	still.wait(t, "delivery to the remaining listener", func(r *recorder) bool { return r.count("p", 2) == 1 && len(r.events) == 1 })
	commits, events, _ := stopped.snapshot()
	if len(commits) != 1 || events != 0 {
		t.Fatalf("stopped listener got %v and %d events after stop", commits, events)
	}
}

// fanOrder: one publisher's notices for a partition arrive in seq order,
// possibly coalesced, ending with the last, even while the handler is
// held up past the listener's queue.
func fanOrder(t *testing.T, h FanoutHarness) {
	f := h.New(t)
	pub := f
	if h.Peer != nil {
		pub = h.Peer(t, f)
	}
	r := newRecorder()
	release := make(chan struct{})
	r.hold, r.holding = release, make(chan struct{})
	listen(t, f, r)
	const n = 5000
	publishCommit(t, pub, "p", 1)
	<-r.holding // the handler is stuck in its first call
	for seq := int64(2); seq <= n; seq++ {
		publishCommit(t, pub, "p", seq)
		if seq%50 == 0 {
			publishCommit(t, pub, "other", seq)
		}
	}
	close(release)
	r.wait(t, "the last notice of both partitions", func(r *recorder) bool { return r.count("p", n) == 1 && r.count("other", n) == 1 })
	commits, _, _ := r.snapshot()
	last := map[string]int64{}
	for _, c := range commits {
		if c.CommitSeq <= last[c.Partition] {
			t.Fatalf("partition %s: seq %d delivered after %d (%d notices in all)", c.Partition, c.CommitSeq, last[c.Partition], len(commits))
		}
		last[c.Partition] = c.CommitSeq
	}
}

// fanReconnect: a dropped listener connection comes back, every handler
// gets Resync (notices sent meanwhile are lost), and delivery resumes.
func fanReconnect(t *testing.T, h FanoutHarness) {
	if h.Kill == nil || h.Peer == nil {
		t.Skip("no listener connection")
	}
	a := h.New(t)
	b := h.Peer(t, a)
	r1, r2 := newRecorder(), newRecorder()
	listen(t, a, r1)
	listen(t, a, r2)
	publishCommit(t, b, "p", 1)
	r1.wait(t, "delivery before the drop", func(r *recorder) bool { return r.count("p", 1) == 1 })
	if _, _, n := r1.snapshot(); n != 0 {
		t.Fatalf("Resync %d times before any drop", n)
	}
	h.Kill(t, a)
	for _, r := range []*recorder{r1, r2} {
		r.wait(t, "Resync after the reconnect", func(r *recorder) bool { return r.resyncs >= 1 })
	}
	publishCommit(t, b, "p", 2)
	publishEvent(t, b, binaryEvent("after"))
	for _, r := range []*recorder{r1, r2} {
		r.wait(t, "delivery after the reconnect", func(r *recorder) bool { return r.count("p", 2) == 1 && r.hasEvent(binaryEvent("after")) })
	}
}

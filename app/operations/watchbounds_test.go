package operations_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/operations"
	"github.com/syncd-dev/syncd/app/sockets"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// heldQuerier counts the queries it runs and holds each until release
// is closed.
type heldQuerier struct {
	ports.AuthoritativeQuerier
	release chan struct{}

	mu                   sync.Mutex
	calls, running, peak int
}

func newHeld(q ports.AuthoritativeQuerier) *heldQuerier {
	return &heldQuerier{AuthoritativeQuerier: q, release: make(chan struct{})}
}

func (h *heldQuerier) QueryAuthoritative(ctx context.Context, p string, q ports.AuthoritativeQuery) (ports.AuthoritativeResult, error) {
	h.mu.Lock()
	h.calls++
	h.running++
	h.peak = max(h.peak, h.running)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()
	select {
	case <-h.release:
	case <-ctx.Done():
		return ports.AuthoritativeResult{}, ctx.Err()
	}
	return h.AuthoritativeQuerier.QueryAuthoritative(ctx, p, q)
}

func (h *heldQuerier) counts() (calls, running, peak int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, h.running, h.peak
}

// waitFor polls cond until it holds (a guard against a hang, not a
// timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// open serves a socket for id on hub; the socket ends when the test does.
func open(t *testing.T, hub *operations.WatchHub, id ports.Identity) *pipeConn {
	t.Helper()
	c := newPipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Serve(context.Background(), id, c)
	}()
	t.Cleanup(func() { close(c.in); <-done })
	return c
}

var alice = ports.Identity{ActorID: "alice", Partition: "part"}

// TestWatchSocketsTakeTheNodeSlots: a watch socket takes its slot from
// the node's socket slots, which the realtime channel's sockets share,
// before its upgrade: past the node's or the actor's cap it is refused
// with sync.websocket_connection_limit, and its slot comes back when it
// ends or its upgrade fails.
func TestWatchSocketsTakeTheNodeSlots(t *testing.T) {
	f := newFixture(t)
	slots, err := sockets.New(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	hub, err := f.service(nil, nil).NewWatchHub(operations.WatchOptions{Log: f.store, Sockets: slots})
	if err != nil {
		t.Fatal(err)
	}
	// A realtime socket of alice holds one of her two slots.
	if err := slots.Take(alice); err != nil {
		t.Fatal(err)
	}
	first, err := hub.Admit(alice)
	if err != nil {
		t.Fatalf("alice's first watch socket: %v", err)
	}
	if _, err := hub.Admit(alice); syncerr.CodeOf(err) != syncerr.WebsocketLimit {
		t.Fatalf("alice's third socket: %v", err)
	}
	bob := ports.Identity{ActorID: "bob", Partition: "part"}
	if _, err := hub.Admit(bob); err != nil {
		t.Fatalf("bob's socket: %v", err)
	}
	if _, err := hub.Admit(ports.Identity{ActorID: "carol", Partition: "part"}); syncerr.CodeOf(err) != syncerr.WebsocketLimit {
		t.Fatalf("the node's fourth socket: %v", err)
	}
	// A failed upgrade gives the slot back (once, however often aborted).
	first.Abort()
	first.Abort()
	if slots.Open() != 2 {
		t.Fatalf("%d slots taken after the abort, want 2", slots.Open())
	}
	// A socket that ends gives its slot back.
	again, err := hub.Admit(alice)
	if err != nil {
		t.Fatalf("alice after the abort: %v", err)
	}
	c := newPipe()
	done := make(chan struct{})
	go func() { defer close(done); again.Run(context.Background(), c) }()
	close(c.in)
	<-done
	if slots.Open() != 2 {
		t.Fatalf("%d slots taken after the socket ended, want 2", slots.Open())
	}
	// Serve refuses a socket past the caps with 1013 after the upgrade.
	if err := slots.Take(alice); err != nil {
		t.Fatal(err)
	}
	refused := newPipe()
	hub.Serve(context.Background(), alice, refused)
	if code := <-refused.closed; code != ports.CloseTryAgainLater {
		t.Fatalf("close code %d, want 1013", code)
	}
}

// TestWatchBoundsPerSocketAndActor: a socket holds at most MaxWatches
// watches and an actor at most MaxWatchesPerActor across its sockets on
// the node; a watch past either is refused with a watch_error
// operation.invalid_request and registers nothing, and an unwatch makes
// room again. Another actor is not bounded by alice's watches.
func TestWatchBoundsPerSocketAndActor(t *testing.T) {
	f := newFixture(t)
	f.task("t1", "p1", "b", false, nil)
	hub, err := f.service([]operations.Query{qByProject}, nil).NewWatchHub(operations.WatchOptions{Log: f.store, MaxWatches: 2, MaxWatchesPerActor: 3})
	if err != nil {
		t.Fatal(err)
	}
	p1 := object(field("project", sv("p1")))
	a, b := open(t, hub, alice), open(t, hub, alice)
	admin := open(t, hub, ports.Identity{ActorID: "admin", Partition: "part"})
	steps := []struct {
		name    string
		c       *pipeConn
		watchID string
		want    string // "snapshot" or the watch_error's code
	}{
		{"alice's first watch", a, "a1", "snapshot"},
		{"alice's second watch", a, "a2", "snapshot"},
		{"a third watch on one socket", a, "a3", "operation.invalid_request"},
		{"alice's third watch, on her other socket", b, "b1", "snapshot"},
		{"alice's fourth watch on the node", b, "b2", "operation.invalid_request"},
		{"admin's watch", admin, "x1", "snapshot"},
		{"admin's second watch", admin, "x2", "snapshot"},
	}
	for _, st := range steps {
		st.c.in <- watchMsg(st.watchID, "c-"+st.watchID, "tasks.byProject", p1)
		e := st.c.next(t)
		got := e.kind
		if e.kind == "watch_error" {
			got = e.code
		}
		if e.watchID != st.watchID || got != st.want {
			t.Fatalf("%s: %+v, want %s", st.name, e, st.want)
		}
	}
	// The refused watches registered nothing: a commit reruns three of
	// alice's watches and admin's two.
	f.task("t2", "p1", "a", false, nil)
	hub.Commit(ports.CommitNotice{Partition: "part", CommitSeq: f.seq})
	for _, c := range []*pipeConn{a, a, b, admin, admin} {
		if e := c.next(t); e.kind != "snapshot" || e.seq != float64(f.seq) {
			t.Fatalf("rerun %+v", e)
		}
	}
	a.quiet(t)
	b.quiet(t)
	// An unwatch on one socket makes room on the other (the refusal of
	// a later message on it shows the unwatch was handled).
	a.in <- unwatchMsg("a1")
	a.in <- watchMsg("probe", "c1", "nope", p1)
	if e := a.next(t); e.watchID != "probe" || e.code != "operation.unknown" {
		t.Fatalf("probe %+v", e)
	}
	b.in <- watchMsg("b2", "c-b2", "tasks.byProject", p1)
	if e := b.next(t); e.watchID != "b2" || e.kind != "snapshot" {
		t.Fatalf("after an unwatch %+v", e)
	}
}

// TestWatchEvaluationsBounded: however many watches a commit wakes, at
// most Evaluations of their queries run at once; the others wait their
// turn and every watch still gets its snapshot.
func TestWatchEvaluationsBounded(t *testing.T) {
	f := newFixture(t)
	f.task("t1", "p1", "b", false, nil)
	held := newHeld(f.store)
	svc := f.service([]operations.Query{qByProject}, func(o *operations.Options) { o.Querier = held })
	hub, err := svc.NewWatchHub(operations.WatchOptions{Log: f.store, Evaluations: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := open(t, hub, alice)
	const watches = 10
	p1 := object(field("project", sv("p1")))
	for i := range watches {
		// Distinct client ids: no two watches share an evaluation.
		c.in <- watchMsg(string(rune('a'+i)), string(rune('a'+i)), "tasks.byProject", p1)
	}
	waitFor(t, "two queries running", func() bool { _, running, _ := held.counts(); return running >= 2 })
	// Every watch is registered and woken; the unbounded hub had all ten
	// queries running by now.
	time.Sleep(200 * time.Millisecond)
	if _, running, _ := held.counts(); running != 2 {
		t.Fatalf("%d queries running at once, want 2", running)
	}
	close(held.release)
	seen := map[string]bool{}
	for range watches {
		e := c.next(t)
		if e.kind != "snapshot" {
			t.Fatalf("%+v", e)
		}
		seen[e.watchID] = true
	}
	if calls, _, peak := held.counts(); len(seen) != watches || calls != watches || peak != 2 {
		t.Fatalf("%d watches answered by %d queries, %d at once at most; want %d, %d, 2", len(seen), calls, peak, watches, watches)
	}
}

// TestIdenticalWatchesShareOneEvaluation: the watches of one caller with
// the same query and params, on any of its sockets, share one query per
// commit and each gets the snapshot; other params, another client id or
// a credential carrying other scopes are other evaluations.
func TestIdenticalWatchesShareOneEvaluation(t *testing.T) {
	f := newFixture(t)
	f.task("t1", "p1", "b", false, nil)
	held := newHeld(f.store)
	close(held.release)
	svc := f.service([]operations.Query{qByProject}, func(o *operations.Options) { o.Querier = held })
	hub, err := svc.NewWatchHub(operations.WatchOptions{Log: f.store})
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := object(field("project", sv("p1"))), object(field("project", sv("p2")))
	scoped := alice
	scoped.Scopes = scopes.Allowed{"project_id": {"p1"}}
	a, b, s := open(t, hub, alice), open(t, hub, alice), open(t, hub, scoped)
	watches := []struct {
		c                 *pipeConn
		watchID, clientID string
		params            []byte
	}{
		{a, "a1", "c1", watchMsg("a1", "c1", "tasks.byProject", p1)},
		{a, "a2", "c1", watchMsg("a2", "c1", "tasks.byProject", p1)},
		{b, "b1", "c1", watchMsg("b1", "c1", "tasks.byProject", p1)},
		{b, "b2", "c1", watchMsg("b2", "c1", "tasks.byProject", p2)}, // other params
		{b, "b3", "c2", watchMsg("b3", "c2", "tasks.byProject", p1)}, // another client id
		{s, "s1", "c1", watchMsg("s1", "c1", "tasks.byProject", p1)}, // other credential scopes
	}
	for _, w := range watches {
		w.c.in <- w.params
		if e := w.c.next(t); e.watchID != w.watchID || e.kind != "snapshot" {
			t.Fatalf("first snapshot of %s: %+v", w.watchID, e)
		}
	}
	before, _, _ := held.counts()
	f.task("t2", "p1", "a", false, nil)
	hub.Commit(ports.CommitNotice{Partition: "part", CommitSeq: f.seq})
	got := map[string]float64{}
	for _, c := range []*pipeConn{a, a, b, b, b, s} {
		e := c.next(t)
		got[e.watchID] = e.seq
	}
	if len(got) != len(watches) {
		t.Fatalf("snapshots after the commit: %v", got)
	}
	for id, seq := range got {
		if seq != float64(f.seq) {
			t.Fatalf("%s's snapshot at %v, want %d", id, seq, f.seq)
		}
	}
	a.quiet(t)
	if after, _, _ := held.counts(); after-before != 4 {
		t.Fatalf("the commit ran %d queries for 4 distinct watches", after-before)
	}
}

// heldLog counts the commit range reads and holds them until release is
// closed.
type heldLog struct {
	ports.LogReader
	release chan struct{}
	mu      sync.Mutex
	reads   int
}

func (l *heldLog) ReadCommitRange(ctx context.Context, p string, r ports.CommitRange) (ports.CommitSpan, error) {
	l.mu.Lock()
	l.reads++
	l.mu.Unlock()
	<-l.release
	return l.LogReader.ReadCommitRange(ctx, p, r)
}

func (l *heldLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads
}

// TestCommitNoticesReadTogether: the notices arriving while a partition's
// commits are read wait for that read and are read together after it,
// not one read per notice.
func TestCommitNoticesReadTogether(t *testing.T) {
	f := newFixture(t)
	f.task("t1", "p1", "b", false, nil)
	log := &heldLog{LogReader: f.store, release: make(chan struct{})}
	hub, err := f.service([]operations.Query{qByProject}, nil).NewWatchHub(operations.WatchOptions{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	c := open(t, hub, alice)
	c.in <- watchMsg("w1", "c1", "tasks.byProject", object(field("project", sv("p1"))))
	c.next(t)
	for i := range 20 {
		id := "n" + string(rune('a'+i))
		f.task(id, "p2", id, false, nil) // p2: the watch on p1 stays within its maxRows
		hub.Commit(ports.CommitNotice{Partition: "part", CommitSeq: f.seq})
	}
	waitFor(t, "a commit read", func() bool { return log.count() > 0 })
	close(log.release)
	for {
		if e := c.next(t); e.seq == float64(f.seq) {
			break
		}
	}
	if n := log.count(); n > 2 {
		t.Fatalf("20 notices read in %d reads, want at most 2", n)
	}
}

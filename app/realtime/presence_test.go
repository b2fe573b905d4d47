package realtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/domain/canonjson"
	domrt "github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// actorGrants resolves each actor's owner grant; it can be changed (a
// revoked scope).
type actorGrants struct {
	mu sync.Mutex
	m  map[string][]string
}

// ResolveScopes reads the request's identity from ctx, as the token and
// development resolvers do, and fails without it.
func (g *actorGrants) ResolveScopes(ctx context.Context, r ports.ScopeRequest) (scopes.Allowed, error) {
	if id, ok := ports.IdentityFrom(ctx); !ok || id.ActorID != r.ActorID || id.Partition != r.Partition {
		return nil, errors.New("no identity of the request in the context")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return scopes.Allowed{"owner": g.m[r.ActorID]}, nil
}

func (g *actorGrants) set(actor string, owners ...string) {
	g.mu.Lock()
	g.m[actor] = owners
	g.mu.Unlock()
}

// bus is a ports.Fanout shared by several hubs (nodes): an event reaches
// every listener, the publisher's own included. lose drops the next
// events.
type bus struct {
	mu   sync.Mutex
	hs   []ports.FanoutHandler
	max  int
	lose int
	sent int // events delivered (or lost)
}

func (b *bus) PublishCommit(context.Context, ports.CommitNotice) error { return nil }
func (b *bus) PublishEvent(_ context.Context, e ports.FanoutEvent) error {
	b.mu.Lock()
	if len(e.Payload) > b.max {
		b.mu.Unlock()
		return errors.New("event too large")
	}
	hs, lose := append([]ports.FanoutHandler(nil), b.hs...), b.lose > 0
	if lose {
		b.lose--
	}
	b.mu.Unlock()
	if !lose {
		for _, h := range hs {
			h.Event(e)
		}
	}
	b.mu.Lock()
	b.sent++
	b.mu.Unlock()
	return nil
}

// await waits until n events have been delivered in all: publishing is
// asynchronous to the sessions and ticks.
func (b *bus) await(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		sent := b.sent
		b.mu.Unlock()
		if sent >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d fanout events delivered, want %d", sent, n)
		}
	}
}
func (b *bus) MaxEventBytes() int { return b.max }
func (b *bus) Listen(_ context.Context, h ports.FanoutHandler) (func(), error) {
	b.mu.Lock()
	b.hs = append(b.hs, h)
	b.mu.Unlock()
	return func() {}, nil
}

func (b *bus) loseNext(n int) {
	b.mu.Lock()
	b.lose = n
	b.mu.Unlock()
}

// presenceWorld is one partition's store and grants, served by one or
// more hubs. Every client subscribes to projects of the owner it names.
type presenceWorld struct {
	t      *testing.T
	st     *fakeStore
	grants *actorGrants
}

func newPresenceWorld(t *testing.T, clients map[string]string) *presenceWorld {
	t.Helper()
	st := &fakeStore{binds: map[string]string{}, clients: map[string]*ports.ClientRecord{}}
	g := &actorGrants{m: map[string][]string{}}
	for id, owner := range clients {
		subs, _ := json.Marshal([]map[string]any{{"id": "projects", "table": "projects", "scopes": map[string][]string{"owner": {owner}}}})
		st.clients[id] = &ports.ClientRecord{Partition: "p", ClientID: id, ActorID: "actor-" + id, WireVersion: 3, Subscriptions: subs}
		g.set("actor-"+id, "alice", "bob")
	}
	return &presenceWorld{t: t, st: st, grants: g}
}

func (w *presenceWorld) hub(o realtime.Options) *realtime.Hub {
	w.t.Helper()
	sch := ssptest.Schema(w.t)
	o.Store, o.Resolver, o.Rounds = w.st, w.grants, noRounds{}
	o.Schema = func() *schema.Schema { return sch }
	withWallClock(&o)
	h, err := realtime.New(o)
	if err != nil {
		w.t.Fatal(err)
	}
	if o.Fanout != nil {
		if _, err := o.Fanout.Listen(context.Background(), h); err != nil {
			w.t.Fatal(err)
		}
	}
	return h
}

// open connects client id to h; close ends its socket and waits for the
// session to end.
func (w *presenceWorld) open(h *realtime.Hub, id string) (c *fakeConn, closeFn func()) {
	w.t.Helper()
	adm, err := h.Admit(context.Background(), ports.Identity{Partition: "p", ActorID: "actor-" + id}, id)
	if err != nil {
		w.t.Fatal(err)
	}
	c = newConn()
	done := make(chan struct{})
	go func() { adm.Run(context.Background(), c); close(done) }()
	var once sync.Once
	closeFn = func() { once.Do(func() { _ = c.Close(ports.CloseNormal, ""); <-done }) }
	w.t.Cleanup(closeFn)
	if _, ok := c.event(w.t).(*domrt.Hello); !ok {
		w.t.Fatal("hello is not the first message")
	}
	return c, closeFn
}

func publish(c *fakeConn, key, doc string) {
	c.in <- ports.RealtimeMessage{Data: []byte(`{"event":"presence","data":{"scopeKey":"` + key + `","doc":` + doc + `}}`)}
}

// wantPresence reads c's next event and checks it is the fanout described
// (doc "" for a leave).
func wantPresence(t *testing.T, c *fakeConn, kind domrt.PresenceKind, client, doc string) {
	t.Helper()
	f, ok := c.event(t).(*domrt.PresenceFanout)
	if !ok {
		t.Fatalf("want a presence %s of %s, got another event", kind, client)
	}
	got := ""
	if f.Doc != nil {
		got = string(canonjson.Marshal(f.Doc, ""))
	}
	if f.Kind != kind || f.ClientID != client || f.ActorID != "actor-"+client || got != doc || f.ScopeKey == "" {
		t.Fatalf("got %s %s/%s doc %s, want %s %s doc %s", f.Kind, f.ActorID, f.ClientID, got, kind, client, doc)
	}
}

func wantPresenceError(t *testing.T, c *fakeConn, key, code string) {
	t.Helper()
	m := c.event(t)
	e, ok := m.(*domrt.PresenceError)
	if !ok || e.ScopeKey != key || e.Error != code {
		t.Fatalf("want %s on %s, got %T %+v", code, key, m, m)
	}
}

// nothingBefore proves c received nothing so far: a forbidden publish is
// answered in order, so its answer must be c's next message.
func nothingBefore(t *testing.T, c *fakeConn) {
	t.Helper()
	publish(c, "user:nobody", `{}`)
	wantPresenceError(t, c, "user:nobody", domrt.PresenceForbidden)
}

func TestPresenceLifecycle(t *testing.T) {
	w := newPresenceWorld(t, map[string]string{"a": "alice", "b": "alice", "c": "alice"})
	h := w.hub(realtime.Options{})
	a, closeA := w.open(h, "a")
	b, _ := w.open(h, "b")

	publish(a, "user:alice", `{"cursor":1}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"cursor":1}`)
	publish(a, "user:alice", `{"cursor":2}`)
	wantPresence(t, b, domrt.PresenceUpdate, "a", `{"cursor":2}`)
	publish(a, "user:alice", `null`)
	wantPresence(t, b, domrt.PresenceLeave, "a", "")
	nothingBefore(t, a) // a publisher never hears its own presence

	publish(a, "user:alice", `{"cursor":3}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"cursor":3}`)
	closeA()
	wantPresence(t, b, domrt.PresenceLeave, "a", "")

	// A late joiner receives the join burst of who is present.
	publish(b, "user:alice", `{"who":"b"}`)
	nothingBefore(t, b) // b's publish is applied
	c, _ := w.open(h, "c")
	wantPresence(t, c, domrt.PresenceJoin, "b", `{"who":"b"}`)
	nothingBefore(t, c)
}

func TestPresenceRefusals(t *testing.T) {
	w := newPresenceWorld(t, map[string]string{"a": "alice", "b": "alice", "d": "bob"})
	h := w.hub(realtime.Options{MaxPresenceBytes: 16})
	a, _ := w.open(h, "a")
	b, _ := w.open(h, "b")
	d, _ := w.open(h, "d")
	tests := []struct {
		name       string
		from       *fakeConn
		key, doc   string
		code       string
		unaffected *fakeConn
	}{
		{"a key not held is forbidden", d, "user:alice", `{"x":1}`, domrt.PresenceForbidden, a},
		{"a leave on a key not held is forbidden", d, "user:alice", `null`, domrt.PresenceForbidden, a},
		{"an over-cap document is too large", a, "user:alice", `{"big":"xxxxxxxxxxxx"}`, domrt.PresenceTooLarge, b},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			publish(tt.from, tt.key, tt.doc)
			wantPresenceError(t, tt.from, tt.key, tt.code)
			nothingBefore(t, tt.unaffected)
		})
	}
	// The refused publish changed nothing: the next one is a join.
	publish(a, "user:alice", `{"ok":1}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"ok":1}`)
	// Privacy: a non-scope-mate hears nothing of it.
	nothingBefore(t, d)
	publish(d, "user:bob", `{"y":2}`)
	nothingBefore(t, d)
	nothingBefore(t, a)
	nothingBefore(t, b)
}

func TestPresenceFollowsRegistrations(t *testing.T) {
	w := newPresenceWorld(t, map[string]string{"a": "alice", "b": "alice"})
	h := w.hub(realtime.Options{})
	a, _ := w.open(h, "a")
	b, _ := w.open(h, "b")
	publish(a, "user:alice", `{"a":1}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"a":1}`)
	publish(b, "user:alice", `{"b":1}`)
	wantPresence(t, a, domrt.PresenceJoin, "b", `{"b":1}`)

	// A refresh that re-derives the same grant changes nothing.
	h.RefreshScopes(context.Background(), "p", "")
	nothingBefore(t, a)
	nothingBefore(t, b)

	// A's scope is revoked: its document leaves and it hears no more.
	w.grants.set("actor-a", "bob")
	h.RefreshScopes(context.Background(), "p", "actor-a")
	wantPresence(t, b, domrt.PresenceLeave, "a", "")
	publish(b, "user:alice", `{"b":2}`)
	nothingBefore(t, b)
	nothingBefore(t, a)
	publish(a, "user:alice", `{"a":2}`)
	wantPresenceError(t, a, "user:alice", domrt.PresenceForbidden)

	// Granted again: A receives the snapshot of who is there.
	w.grants.set("actor-a", "alice")
	h.RefreshScopes(context.Background(), "p", "actor-a")
	wantPresence(t, a, domrt.PresenceJoin, "b", `{"b":2}`)
	nothingBefore(t, b)
}

func TestPresenceSameClientReplaces(t *testing.T) {
	w := newPresenceWorld(t, map[string]string{"a": "alice", "b": "alice"})
	h := w.hub(realtime.Options{})
	a1, close1 := w.open(h, "a")
	b, _ := w.open(h, "b")
	publish(a1, "user:alice", `{"tab":1}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"tab":1}`)
	a2, _ := w.open(h, "a") // the same client reconnecting
	publish(a2, "user:alice", `{"tab":2}`)
	wantPresence(t, b, domrt.PresenceUpdate, "a", `{"tab":2}`)
	close1() // the old socket's end does not take the new document
	nothingBefore(t, b)
}

func TestPresenceAcrossNodes(t *testing.T) {
	w := newPresenceWorld(t, map[string]string{"a": "alice", "b": "alice", "c": "alice"})
	fan := &bus{max: 64 << 10}
	n1 := w.hub(realtime.Options{Fanout: fan})
	n2 := w.hub(realtime.Options{Fanout: fan})
	a, closeA := w.open(n1, "a")
	b, _ := w.open(n2, "b")

	publish(a, "user:alice", `{"n":1}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"n":1}`)
	publish(a, "user:alice", `{"n":2}`)
	wantPresence(t, b, domrt.PresenceUpdate, "a", `{"n":2}`)
	publish(b, "user:alice", `{"m":1}`)
	wantPresence(t, a, domrt.PresenceJoin, "b", `{"m":1}`)
	nothingBefore(t, a) // its own document did not come back from the bus

	// A third socket on the second node sees both, one local, one remote.
	c, _ := w.open(n2, "c")
	seen := map[string]bool{}
	for range 2 {
		f, ok := c.event(t).(*domrt.PresenceFanout)
		if !ok || f.Kind != domrt.PresenceJoin {
			t.Fatalf("want the join burst, got %+v", f)
		}
		seen[f.ClientID] = true
	}
	if !seen["a"] || !seen["b"] {
		t.Fatalf("snapshot named %v", seen)
	}

	closeA()
	wantPresence(t, b, domrt.PresenceLeave, "a", "")
	wantPresence(t, c, domrt.PresenceLeave, "a", "")

	// A node that stops takes its documents with it, even when the
	// leaves of its sockets were lost on the way.
	a, closeA = w.open(n1, "a")
	wantPresence(t, a, domrt.PresenceJoin, "b", `{"m":1}`)
	publish(a, "user:alice", `{"n":3}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"n":3}`)
	wantPresence(t, c, domrt.PresenceJoin, "a", `{"n":3}`)
	fan.loseNext(1) // the leave of A's socket
	closeA()
	if err := n1.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantPresence(t, b, domrt.PresenceLeave, "a", "")
	wantPresence(t, c, domrt.PresenceLeave, "a", "")
}

func TestPresenceLargerThanTheFanoutCarries(t *testing.T) {
	w := newPresenceWorld(t, map[string]string{"a": "alice", "b": "alice"})
	fan := &bus{max: 300}
	n1 := w.hub(realtime.Options{Fanout: fan})
	n2 := w.hub(realtime.Options{Fanout: fan})
	a, _ := w.open(n1, "a")
	b, _ := w.open(n2, "b")
	publish(a, "user:alice", `{"big":"`+strings.Repeat("x", 300)+`"}`)
	wantPresenceError(t, a, "user:alice", domrt.PresenceTooLarge)
	publish(a, "user:alice", `{"small":1}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"small":1}`)
}

// ticker is a Sleep the test steps: tick runs one wake-up of the loop
// sleeping on it and returns once the loop sleeps again.
type ticker struct{ next, idle chan struct{} }

func newTicker() *ticker { return &ticker{next: make(chan struct{}), idle: make(chan struct{})} }

func (k *ticker) Sleep(ctx context.Context, _ time.Duration) error {
	select {
	case k.idle <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-k.next:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (k *ticker) tick() { k.next <- struct{}{}; <-k.idle }

func TestPresenceOfASilentNodeExpires(t *testing.T) {
	w := newPresenceWorld(t, map[string]string{"a": "alice", "b": "alice"})
	fan := &bus{max: 64 << 10}
	clk := clock.NewVirtual(1_000_000)
	lease := 30 * time.Second
	k1, k2 := newTicker(), newTicker()
	n1 := w.hub(realtime.Options{Fanout: fan, Now: clk.Now, Sleep: k1.Sleep, PresenceLease: lease})
	n2 := w.hub(realtime.Options{Fanout: fan, Now: clk.Now, Sleep: k2.Sleep, PresenceLease: lease})
	ctx1, crash1 := context.WithCancel(context.Background())
	ctx2, stop2 := context.WithCancel(context.Background())
	t.Cleanup(func() { crash1(); stop2() })
	go n1.Maintain(ctx1)
	go n2.Maintain(ctx2)
	<-k1.idle
	<-k2.idle
	a, _ := w.open(n1, "a")
	b, _ := w.open(n2, "b")
	publish(a, "user:alice", `{"n":1}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"n":1}`)
	publish(b, "user:alice", `{"m":1}`)
	wantPresence(t, a, domrt.PresenceJoin, "b", `{"m":1}`)
	sent := 2

	// Renewed every third of the lease, a live node's documents stay,
	// however long it holds them.
	step := func() {
		if _, err := clk.Advance((lease / 3).Milliseconds()); err != nil {
			t.Fatal(err)
		}
		k1.tick()
		k2.tick()
		sent += 2 // both renewals
		fan.await(t, sent)
	}
	for range 6 {
		step()
	}
	nothingBefore(t, b)
	nothingBefore(t, a)

	// The first node goes silent (crashed: no leave, no gone). Its document
	// outlives its last renewal by a lease, then leaves; the second node's
	// own document is never expired.
	crash1()
	for range 3 {
		if _, err := clk.Advance((lease / 3).Milliseconds()); err != nil {
			t.Fatal(err)
		}
		k2.tick()
		sent++
		fan.await(t, sent)
	}
	nothingBefore(t, b)
	if _, err := clk.Advance((lease / 3).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	k2.tick()
	wantPresence(t, b, domrt.PresenceLeave, "a", "")
	nothingBefore(t, b)
}

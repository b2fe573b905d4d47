package realtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/commit"
	domrt "github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// fakeStore holds one partition's log and client records in memory.
type fakeStore struct {
	mu      sync.Mutex
	commits []commit.Commit
	clients map[string]*ports.ClientRecord
	binds   map[string]string
	acks    []ports.CursorAdvance
	epoch   string
	horizon int64
	// reads counts the log reads: range (a node's shared read) and
	// window (a session's own).
	rangeReads, windowReads int
	// rangeLimit, when set, stands in for the change limit of range reads.
	rangeLimit int
}

func (f *fakeStore) TouchPartition(context.Context, string, int64) (string, error) {
	return f.epochNow(), nil
}

func (f *fakeStore) LogEpoch(context.Context, string) (string, bool, error) {
	return f.epochNow(), true, nil
}

// epochNow is the partition's epoch: e1 until rotate.
func (f *fakeStore) epochNow() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epoch == "" {
		return "e1"
	}
	return f.epoch
}

// rotate is a restore: a new epoch, the client records gone, the log
// back at n commits.
func (f *fakeStore) rotate(epoch string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epoch, f.clients, f.commits = epoch, map[string]*ports.ClientRecord{}, f.commits[:n]
}

func (f *fakeStore) GetClient(_ context.Context, _, id string) (*ports.ClientRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.clients[id]; r != nil {
		c := *r
		return &c, nil
	}
	return nil, nil
}

func (f *fakeStore) BindClient(_ context.Context, _, id, actor string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.binds[id]; ok {
		return a, nil
	}
	f.binds[id] = actor
	return actor, nil
}

func (f *fakeStore) AdvanceClientCursor(_ context.Context, a ports.CursorAdvance) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acks = append(f.acks, a)
	return true, nil
}

func (f *fakeStore) LogBounds(context.Context, string) (ports.LogBounds, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ports.LogBounds{MaxSeq: int64(len(f.commits)), HorizonSeq: f.horizon}, nil
}

func (f *fakeStore) ReadCommitRange(_ context.Context, _ string, r ports.CommitRange) (ports.CommitSpan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rangeReads++
	limit := r.LimitChanges
	if f.rangeLimit > 0 {
		limit = f.rangeLimit
	}
	sp := ports.CommitSpan{ThroughSeq: r.ThroughSeq}
	n := 0
	for _, c := range f.commits {
		if c.Seq <= r.AfterSeq || c.Seq > r.ThroughSeq {
			continue
		}
		if n += len(c.Changes); n > limit {
			sp.ThroughSeq = c.Seq - 1
			break
		}
		sp.Commits = append(sp.Commits, c)
	}
	return sp, nil
}

func (f *fakeStore) reads() (rangeReads, windowReads int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rangeReads, f.windowReads
}

func (f *fakeStore) ReadCommitWindow(_ context.Context, _ string, w ports.CommitWindow) ([]commit.Commit, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.windowReads++
	var out []commit.Commit
	for _, c := range f.commits {
		if c.Seq <= w.AfterSeq || c.Seq > w.ThroughSeq {
			continue
		}
		m := c
		m.Changes = nil
		for _, ch := range c.Changes {
			if ch.Table == w.Table && scopes.Matches(ch.Scopes, w.ScopeFilter) {
				m.Changes = append(m.Changes, ch)
			}
		}
		if len(m.Changes) > 0 {
			out = append(out, m)
		}
	}
	return out, nil
}

// commit appends a commit of one project row owned by owner.
func (f *fakeStore) commit(owner string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq := int64(len(f.commits) + 1)
	f.commits = append(f.commits, commit.Commit{Seq: seq, ActorID: owner, Changes: []commit.Change{
		{Table: "projects", RowID: "p", Op: commit.OpDelete, Scopes: map[string]string{"owner": owner}},
	}})
	return seq
}

type grants struct{}

func (grants) ResolveScopes(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
	return scopes.Allowed{"owner": {"alice"}}, nil
}

type noRounds struct{}

func (noRounds) Handle(context.Context, ports.Identity, []byte) (*round.Response, error) {
	return nil, syncerr.New(syncerr.InvalidRequest)
}

// fakeFanout is an in-memory ports.Fanout: published notices reach the
// listener, and lose drops them (as a broken listener connection would).
type fakeFanout struct {
	mu   sync.Mutex
	h    ports.FanoutHandler
	lose bool
}

func (f *fakeFanout) PublishCommit(_ context.Context, n ports.CommitNotice) error {
	f.mu.Lock()
	h, lose := f.h, f.lose
	f.mu.Unlock()
	if h != nil && !lose {
		h.Commit(n)
	}
	return nil
}
func (f *fakeFanout) PublishEvent(context.Context, ports.FanoutEvent) error { return nil }
func (f *fakeFanout) MaxEventBytes() int                                    { return 8000 }
func (f *fakeFanout) Listen(_ context.Context, h ports.FanoutHandler) (func(), error) {
	f.mu.Lock()
	f.h = h
	f.mu.Unlock()
	return func() {}, nil
}

// fakeConn is a socket whose client side is the test.
type fakeConn struct {
	in     chan ports.RealtimeMessage
	out    chan ports.RealtimeMessage
	closed chan struct{}
	code   int
	once   sync.Once
}

func newConn() *fakeConn {
	return &fakeConn{in: make(chan ports.RealtimeMessage), out: make(chan ports.RealtimeMessage, 64), closed: make(chan struct{})}
}

func (c *fakeConn) Read(ctx context.Context) (ports.RealtimeMessage, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.closed:
		return ports.RealtimeMessage{}, errors.New("closed")
	case <-ctx.Done():
		return ports.RealtimeMessage{}, ctx.Err()
	}
}
func (c *fakeConn) Write(_ context.Context, m ports.RealtimeMessage) error { c.out <- m; return nil }
func (c *fakeConn) Ping(context.Context) error                             { return nil }
func (c *fakeConn) Close(code int, _ string) error {
	c.once.Do(func() { c.code = code; close(c.closed) })
	return nil
}

func (c *fakeConn) next(t *testing.T) ports.RealtimeMessage {
	t.Helper()
	select {
	case m := <-c.out:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no message from the session")
		return ports.RealtimeMessage{}
	}
}

func (c *fakeConn) event(t *testing.T) domrt.Message {
	t.Helper()
	m := c.next(t)
	if m.Binary {
		t.Fatalf("want a control event, got binary %x", m.Data)
	}
	e, err := domrt.ParseServerEvent(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type fixture struct {
	st  *fakeStore
	fan *fakeFanout
	hub *realtime.Hub
}

func newFixture(t *testing.T, o realtime.Options) *fixture {
	t.Helper()
	subs, _ := json.Marshal([]map[string]any{{"id": "projects", "table": "projects", "scopes": map[string][]string{"owner": {"alice"}}}})
	st := &fakeStore{binds: map[string]string{}, clients: map[string]*ports.ClientRecord{
		"b": {Partition: "p", ClientID: "b", ActorID: "alice", WireVersion: 3, Cursor: 0, Subscriptions: subs},
	}}
	f := &fixture{st: st, fan: &fakeFanout{}}
	o.Store = st
	f.hub = f.rebuild(t, o)
	return f
}

// rebuild replaces the fixture's hub by one with o over o.Store.
func (f *fixture) rebuild(t *testing.T, o realtime.Options) *realtime.Hub {
	t.Helper()
	sch := ssptest.Schema(t)
	if o.Resolver == nil {
		o.Resolver = grants{}
	}
	if o.Rounds == nil {
		o.Rounds = noRounds{}
	}
	o.Schema = func() *schema.Schema { return sch }
	withWallClock(&o)
	h, err := realtime.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.fan.Listen(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	return h
}

func (f *fixture) connect(t *testing.T, actor, client string) (*fakeConn, *domrt.Hello) {
	t.Helper()
	adm, err := f.hub.Admit(context.Background(), ports.Identity{Partition: "p", ActorID: actor}, client)
	if err != nil {
		t.Fatal(err)
	}
	c := newConn()
	done := make(chan struct{})
	go func() { adm.Run(context.Background(), c); close(done) }()
	t.Cleanup(func() { _ = c.Close(ports.CloseNormal, ""); <-done })
	h, ok := c.event(t).(*domrt.Hello)
	if !ok {
		t.Fatal("hello is not the first message")
	}
	return c, h
}

func (f *fixture) publish(seq int64) {
	_ = f.fan.PublishCommit(context.Background(), ports.CommitNotice{Partition: "p", CommitSeq: seq})
}

func TestDeltasAndWakeUps(t *testing.T) {
	t.Run("a notice delivers a delta of the matching commits", func(t *testing.T) {
		f := newFixture(t, realtime.Options{})
		c, h := f.connect(t, "alice", "b")
		if h.RequiresSync {
			t.Fatalf("caught-up hello %+v", h)
		}
		f.st.commit("bob") // outside the registration: no delta, but observed
		f.publish(1)
		seq := f.st.commit("alice")
		f.publish(seq)
		m := c.next(t)
		if !m.Binary || m.Data[0] != domrt.TagDelta {
			t.Fatalf("want a delta, got %s", m.Data)
		}
		msg, err := ssp2.Decode(m.Data[1:])
		if err != nil {
			t.Fatal(err)
		}
		var commits int
		var end *ssp2.SubEnd
		for _, fr := range msg.Frames {
			switch fr := fr.(type) {
			case *ssp2.Commit:
				commits++
				if fr.CommitSeq != 2 {
					t.Fatalf("commit %d, want only the matching one", fr.CommitSeq)
				}
			case *ssp2.SubEnd:
				end = fr
			}
		}
		if commits != 1 || end == nil || end.NextCursor != 2 {
			t.Fatalf("delta frames %+v", msg.Frames)
		}
	})
	t.Run("a lost notice is caught up on Resync", func(t *testing.T) {
		f := newFixture(t, realtime.Options{})
		c, _ := f.connect(t, "alice", "b")
		f.fan.lose = true
		f.publish(f.st.commit("alice"))
		f.hub.Resync()
		if m := c.next(t); !m.Binary || m.Data[0] != domrt.TagDelta {
			t.Fatalf("want the delta after a resync, got %s", m.Data)
		}
	})
	t.Run("an oversize delta is a delta-too-large wake-up", func(t *testing.T) {
		f := newFixture(t, realtime.Options{MaxDeltaBytes: 1})
		c, _ := f.connect(t, "alice", "b")
		f.publish(f.st.commit("alice"))
		if w, ok := c.event(t).(*domrt.Wake); !ok || w.Reason != domrt.WakeDeltaTooLarge {
			t.Fatalf("want delta-too-large, got %+v", w)
		}
		// Suppressed until an ack reaches the observed seq: a wake, no delta.
		f.publish(f.st.commit("alice"))
		if w, ok := c.event(t).(*domrt.Wake); !ok || w.Reason != domrt.WakeCatchupRequired || w.Cursor != 2 {
			t.Fatalf("want catchup-required, got %+v", w)
		}
	})
	t.Run("a behind session wakes until an ack reaches the observed seq", func(t *testing.T) {
		f := newFixture(t, realtime.Options{})
		f.st.commit("alice")
		c, h := f.connect(t, "alice", "b")
		if !h.RequiresSync || h.Cursor != 0 || h.LatestCursor != 1 {
			t.Fatalf("behind hello %+v", h)
		}
		f.publish(f.st.commit("alice"))
		if w, ok := c.event(t).(*domrt.Wake); !ok || w.Reason != domrt.WakeCatchupRequired {
			t.Fatalf("want catchup-required, got %+v", w)
		}
		c.in <- ports.RealtimeMessage{Data: []byte(`{"type":"ack","cursor":2}`)}
		// The ack is applied before it is stored: wait for the store.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			f.st.mu.Lock()
			n := len(f.st.acks)
			f.st.mu.Unlock()
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the ack was never stored")
			}
		}
		f.publish(f.st.commit("alice"))
		if m := c.next(t); !m.Binary || m.Data[0] != domrt.TagDelta {
			t.Fatalf("deltas resume after the ack, got %s", m.Data)
		}
		f.st.mu.Lock()
		acks := append([]ports.CursorAdvance(nil), f.st.acks...)
		f.st.mu.Unlock()
		if len(acks) != 1 || acks[0].Cursor != 2 || acks[0].ActorID != "alice" || acks[0].LogEpoch != "e1" {
			t.Fatalf("stored acks %+v", acks)
		}
	})
}

func TestMalformedControlClosesTheSocket(t *testing.T) {
	f := newFixture(t, realtime.Options{})
	c, _ := f.connect(t, "alice", "b")
	c.in <- ports.RealtimeMessage{Data: []byte(`{"type":"ack","cursor":1.5}`)}
	select {
	case <-c.closed:
		if c.code != ports.ClosePolicy {
			t.Fatalf("close code %d", c.code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a malformed ack did not close the socket")
	}
}

func TestSocketLimitsAndDrain(t *testing.T) {
	f := newFixture(t, realtime.Options{MaxSockets: 2, MaxSocketsPerActor: 1})
	c, _ := f.connect(t, "alice", "b")
	_, err := f.hub.Admit(context.Background(), ports.Identity{Partition: "p", ActorID: "alice"}, "b2")
	if syncerr.CodeOf(err) != syncerr.WebsocketLimit {
		t.Fatalf("second socket of one actor: %v", err)
	}
	f.connect(t, "carol", "c")
	if _, err := f.hub.Admit(context.Background(), ports.Identity{Partition: "p", ActorID: "dave"}, "d"); syncerr.CodeOf(err) != syncerr.WebsocketLimit {
		t.Fatalf("third socket of the node: %v", err)
	}
	if err := f.hub.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-c.closed
	if c.code != ports.CloseGoingAway {
		t.Fatalf("drain closed with %d, want 1001", c.code)
	}
	if f.hub.Sessions() != 0 {
		t.Fatalf("%d sessions after the drain", f.hub.Sessions())
	}
}

// waitAck waits until the store holds n acks and returns them.
func (f *fakeStore) waitAck(t *testing.T, n int) []ports.CursorAdvance {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		f.mu.Lock()
		acks := append([]ports.CursorAdvance(nil), f.acks...)
		f.mu.Unlock()
		if len(acks) >= n {
			return acks
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acks stored, want %d", len(acks), n)
		}
	}
}

func wantWake(t *testing.T, c *fakeConn, reason domrt.WakeReason, cursor int64) {
	t.Helper()
	w, ok := c.event(t).(*domrt.Wake)
	if !ok || w.Reason != reason || w.Cursor != cursor {
		t.Fatalf("want a %s wake-up at cursor %d, got %+v", reason, cursor, w)
	}
}

// SPEC §8.3: reset-required is the server-declared discontinuity: the
// log epoch rotated (a restore), a cursor below the pruning horizon.
func TestResetRequired(t *testing.T) {
	t.Run("a restore's epoch rotation resets the connected sessions", func(t *testing.T) {
		f := newFixture(t, realtime.Options{})
		c, _ := f.connect(t, "alice", "b")
		f.st.commit("alice")
		f.publish(f.st.commit("alice"))
		if m := c.next(t); !m.Binary || m.Data[0] != domrt.TagDelta {
			t.Fatalf("want a delta, got %s", m.Data)
		}
		f.st.rotate("e2", 1) // the backup held one commit
		f.hub.ResetPartition(context.Background(), "p")
		wantWake(t, c, domrt.WakeResetRequired, 1)
		// The rotation deleted the client record: no registration is left,
		// and acks carry the new epoch.
		f.publish(f.st.commit("alice"))
		c.in <- ports.RealtimeMessage{Data: []byte(`{"type":"ack","cursor":2}`)}
		if acks := f.st.waitAck(t, 1); acks[0].LogEpoch != "e2" {
			t.Fatalf("ack after the reset stored under epoch %q", acks[0].LogEpoch)
		}
		c.in <- ports.RealtimeMessage{Data: []byte(`{"type":"ack","cursor":2}`)}
		f.st.waitAck(t, 2)
		select {
		case m := <-c.out:
			t.Fatalf("a session without registrations was sent %s", m.Data)
		default:
		}
	})
	t.Run("a resync notices a rotation whose reset was not heard", func(t *testing.T) {
		f := newFixture(t, realtime.Options{})
		c, _ := f.connect(t, "alice", "b")
		f.st.commit("alice")
		f.st.rotate("e2", 0)
		f.hub.Resync()
		wantWake(t, c, domrt.WakeResetRequired, 0)
	})
	t.Run("a catch-up below the pruning horizon is reset-required", func(t *testing.T) {
		f := newFixture(t, realtime.Options{})
		for range 3 {
			f.st.commit("alice")
		}
		f.st.horizon = 2 // the record's cursor 0 was pruned past
		c, h := f.connect(t, "alice", "b")
		if !h.RequiresSync {
			t.Fatalf("hello %+v", h)
		}
		f.publish(f.st.commit("alice"))
		wantWake(t, c, domrt.WakeResetRequired, 4)
	})
	t.Run("a catch-up above the horizon stays catchup-required", func(t *testing.T) {
		f := newFixture(t, realtime.Options{})
		for range 3 {
			f.st.commit("alice")
		}
		f.st.horizon = 0
		c, _ := f.connect(t, "alice", "b")
		f.publish(f.st.commit("alice"))
		wantWake(t, c, domrt.WakeCatchupRequired, 4)
	})
}

// withWallClock gives o the wall clock where the test set no clock.
func withWallClock(o *realtime.Options) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = clock.Wall{}.Sleep
	}
}

// SPEC §1.5: a client id belongs to the first actor that uses it in the
// partition, and opening a socket is a use: the upgrade binds a fresh id
// to its actor and refuses an id bound to another, whether or not that
// actor ever pulled (a push binds without a client record).
func TestTheUpgradeBindsTheClientID(t *testing.T) {
	f := newFixture(t, realtime.Options{})
	ctx := context.Background()
	alice, bob := ports.Identity{Partition: "p", ActorID: "alice"}, ports.Identity{Partition: "p", ActorID: "bob"}

	f.st.mu.Lock()
	f.st.binds["pushed-by-bob"] = "bob" // bound by a push: no client record
	f.st.mu.Unlock()
	if _, err := f.hub.Admit(ctx, alice, "pushed-by-bob"); syncerr.CodeOf(err) != syncerr.InvalidClientID {
		t.Fatalf("a socket under bob's client id: %v, want %s", err, syncerr.InvalidClientID)
	}

	adm, err := f.hub.Admit(ctx, alice, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	adm.Abort()
	f.st.mu.Lock()
	boundTo := f.st.binds["fresh"]
	f.st.mu.Unlock()
	if boundTo != "alice" {
		t.Fatalf("the upgrade bound the fresh id to %q, want alice", boundTo)
	}
	if _, err := f.hub.Admit(ctx, bob, "fresh"); syncerr.CodeOf(err) != syncerr.InvalidClientID {
		t.Fatalf("bob's socket under alice's fresh id: %v, want %s", err, syncerr.InvalidClientID)
	}
	if f.hub.Sessions() != 0 {
		t.Fatalf("%d sessions hold a slot after refusals and an abort", f.hub.Sessions())
	}
}

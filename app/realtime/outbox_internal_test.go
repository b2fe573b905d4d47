package realtime

import (
	"context"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/realtime"
)

func doc(t *testing.T, s string) *canonjson.Object {
	t.Helper()
	v, err := canonjson.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v.(*canonjson.Object)
}

// drain takes every queued message (waiting a moment for more).
func drain(t *testing.T, o *outbox) []realtime.Message {
	t.Helper()
	var out []realtime.Message
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		m, err := o.take(ctx)
		cancel()
		if err != nil {
			return out
		}
		if m.Binary {
			continue
		}
		e, err := realtime.ParseServerEvent(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

// A slow reader holds one presence message per peer and key, whatever the
// number of publishes, and it says what the reader would have concluded
// from all of them.
func TestQueuedPresenceCoalesces(t *testing.T) {
	join := func(client, d string) *realtime.PresenceFanout {
		return &realtime.PresenceFanout{ScopeKey: "k", Kind: realtime.PresenceJoin, ActorID: "a", ClientID: client, Doc: doc(t, d)}
	}
	update := func(client, d string) *realtime.PresenceFanout {
		f := join(client, d)
		f.Kind = realtime.PresenceUpdate
		return f
	}
	leave := func(client string) *realtime.PresenceFanout {
		return &realtime.PresenceFanout{ScopeKey: "k", Kind: realtime.PresenceLeave, ActorID: "a", ClientID: client}
	}
	type want struct {
		kind   realtime.PresenceKind
		client string
		doc    string
	}
	cases := []struct {
		name string
		in   []*realtime.PresenceFanout
		want []want
	}{
		{"a join then updates is one join with the latest document",
			[]*realtime.PresenceFanout{join("c", `{"x":1}`), update("c", `{"x":2}`), update("c", `{"x":3}`)},
			[]want{{realtime.PresenceJoin, "c", `{"x":3}`}}},
		{"updates are the latest update",
			[]*realtime.PresenceFanout{update("c", `{"x":1}`), update("c", `{"x":2}`)},
			[]want{{realtime.PresenceUpdate, "c", `{"x":2}`}}},
		{"a join then a leave is nothing",
			[]*realtime.PresenceFanout{join("c", `{"x":1}`), update("c", `{"x":2}`), leave("c")},
			nil},
		{"an update then a leave is the leave",
			[]*realtime.PresenceFanout{update("c", `{"x":1}`), leave("c")},
			[]want{{realtime.PresenceLeave, "c", ""}}},
		{"a leave then a join is an update: the receiver knew the peer",
			[]*realtime.PresenceFanout{leave("c"), join("c", `{"x":9}`)},
			[]want{{realtime.PresenceUpdate, "c", `{"x":9}`}}},
		{"a leave, a join and a leave is the leave",
			[]*realtime.PresenceFanout{leave("c"), join("c", `{"x":9}`), leave("c")},
			[]want{{realtime.PresenceLeave, "c", ""}}},
		{"an update, a leave and a join is an update",
			[]*realtime.PresenceFanout{update("c", `{"x":1}`), leave("c"), join("c", `{"x":2}`)},
			[]want{{realtime.PresenceUpdate, "c", `{"x":2}`}}},
		{"peers stay apart, in their first order",
			[]*realtime.PresenceFanout{join("c", `{"x":1}`), join("d", `{"y":1}`), update("c", `{"x":2}`)},
			[]want{{realtime.PresenceJoin, "c", `{"x":2}`}, {realtime.PresenceJoin, "d", `{"y":1}`}}},
		{"a join after its own coalesced leave queues again",
			[]*realtime.PresenceFanout{join("c", `{"x":1}`), leave("c"), join("c", `{"x":2}`)},
			[]want{{realtime.PresenceJoin, "c", `{"x":2}`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutbox(1<<20, nil)
			for _, f := range tc.in {
				if !o.presence(f, false) {
					t.Fatal("overflow")
				}
			}
			got := drain(t, o)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d messages %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				f, ok := got[i].(*realtime.PresenceFanout)
				if !ok || f.Kind != w.kind || f.ClientID != w.client {
					t.Fatalf("message %d: %+v, want %+v", i, got[i], w)
				}
				if d := string(canonjson.Marshal(f.Doc, "")); w.doc != "" && d != w.doc {
					t.Fatalf("message %d document %s, want %s", i, d, w.doc)
				}
			}
			if o.bytes != 0 {
				t.Fatalf("%d bytes still counted after the drain", o.bytes)
			}
		})
	}
}

// Control messages are counted: past the socket's bound plus a quarter
// the queue refuses them, and the session closes the socket.
func TestControlMessagesOverflow(t *testing.T) {
	o := newOutbox(1000, nil)
	text := make([]byte, 100)
	for i := 0; i < 12; i++ {
		if !o.control(text, "") {
			t.Fatalf("message %d refused below the bound", i)
		}
	}
	queued := 0
	for i := 0; i < 3; i++ {
		if o.control(text, "") {
			queued++
		}
	}
	if queued != 0 {
		t.Fatalf("%d control messages past the bound and a quarter were queued", queued)
	}
	// Distinct peers each take room: a flood of them overflows too.
	p := newOutbox(1000, nil)
	overflowed := false
	for i := 0; i < 100 && !overflowed; i++ {
		overflowed = !p.presence(&realtime.PresenceFanout{ScopeKey: "k", Kind: realtime.PresenceJoin, ActorID: "a",
			ClientID: string(rune('a'+i%26)) + string(rune('a'+i/26)), Doc: doc(t, `{"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)}, false)
	}
	if !overflowed {
		t.Fatal("presence of 100 peers fitted in a 1000-byte queue")
	}
}

// The join burst of a key a socket gains is the room as it is: queued
// whatever its size, and not counted as the client letting messages pile
// up; what piles up after it still is.
func TestPresenceStateIsNotAnOverflow(t *testing.T) {
	o := newOutbox(1000, nil)
	peer := func(i int) string { return string(rune('a'+i%26)) + string(rune('a'+i/26)) }
	pad := doc(t, `{"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	for i := 0; i < 100; i++ {
		if !o.presence(&realtime.PresenceFanout{ScopeKey: "k", Kind: realtime.PresenceJoin, ActorID: "a", ClientID: peer(i), Doc: pad}, true) {
			t.Fatalf("the room's state refused at peer %d", i)
		}
	}
	// Updates of peers in the burst coalesce into it.
	for i := 0; i < 100; i++ {
		if !o.presence(&realtime.PresenceFanout{ScopeKey: "k", Kind: realtime.PresenceUpdate, ActorID: "a", ClientID: peer(i), Doc: pad}, false) {
			t.Fatalf("an update of peer %d in the burst overflowed", i)
		}
	}
	overflowed := false
	for i := 0; i < 100 && !overflowed; i++ {
		overflowed = !o.presence(&realtime.PresenceFanout{ScopeKey: "k2", Kind: realtime.PresenceJoin, ActorID: "a", ClientID: peer(i), Doc: pad}, false)
	}
	if !overflowed {
		t.Fatal("live deliveries past the bound were queued behind the burst")
	}
	if got := drain(t, o); len(got) < 100 {
		t.Fatalf("%d messages drained, want the burst of 100 and more", len(got))
	}
	if o.bytes != 0 || o.state != 0 {
		t.Fatalf("bytes %d, state %d after the drain", o.bytes, o.state)
	}
}

// The node's send budget bounds every socket's queue together: a delta
// that does not fit is refused, a round chunk waits until another socket
// drains.
func TestSendBudgetIsSharedByTheSockets(t *testing.T) {
	b := newSendBudget(1000)
	a, c := newOutbox(800, b), newOutbox(800, b)
	if !a.offer(make([]byte, 700)) {
		t.Fatal("the first delta did not fit")
	}
	if c.offer(make([]byte, 400)) {
		t.Fatal("a delta past the node's budget was queued")
	}
	if !c.control([]byte("{}"), "") {
		t.Fatal("a control message was refused by the node's budget")
	}
	got := make(chan error, 1)
	go func() { got <- c.wait(context.Background(), 400) }()
	select {
	case err := <-got:
		t.Fatalf("a round chunk did not wait for the budget: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := a.take(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the round chunk still waits after the other socket drained")
	}
	c.close()
	a.close()
	if u := b.Used(); u != 0 {
		t.Fatalf("%d bytes charged after every queue closed", u)
	}
}

package realtime_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/app/round"
	domrt "github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// gatedRounds answers every round with RESP_HEADER and END, each only
// once the test lets it through (open), and counts the rounds begun
// (each also announced on entered).
type gatedRounds struct {
	mu      sync.Mutex
	calls   int
	gate    chan struct{}
	entered chan struct{}
}

func newGatedRounds() *gatedRounds {
	return &gatedRounds{gate: make(chan struct{}), entered: make(chan struct{}, 8)}
}

func (g *gatedRounds) Handle(ctx context.Context, _ ports.Identity, _ []byte) (*round.Response, error) {
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	g.entered <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &round.Response{WireVersion: 3, Frames: []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"}}}, nil
}

func (g *gatedRounds) open() { close(g.gate) }

func (g *gatedRounds) begun() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// roundRequest is a complete pull request of client b as one 0x01 chunk.
func roundRequest(t *testing.T) ports.RealtimeMessage {
	t.Helper()
	req := ssptest.Req{ClientID: "b", SchemaVersion: 1, Epoch: "e1", Pull: true}.Encode(t)
	return ports.RealtimeMessage{Binary: true, Data: append([]byte{domrt.TagRound}, req...)}
}

// roundEnd reads the session's messages up to the round's last 0x01
// chunk (the response ends exactly at END, SPEC §8.7).
func roundEnd(t *testing.T, c *fakeConn) {
	t.Helper()
	var stream []byte
	for {
		m := c.next(t)
		if !m.Binary || m.Data[0] != domrt.TagRound {
			continue
		}
		stream = append(stream, m.Data[1:]...)
		if _, err := ssp2.Decode(stream); err == nil {
			return
		}
	}
}

// SPEC §8.7 "One round in flight": round bytes received while a
// response stream is in flight are not processed and drop the
// connection; the round is complete at the response's END, and the next
// 0x01 message begins a new round.
func TestOneRoundInFlight(t *testing.T) {
	t.Run("a request received while the response is in flight closes the socket unprocessed", func(t *testing.T) {
		g := newGatedRounds()
		f := newFixture(t, realtime.Options{Rounds: g})
		c, _ := f.connect(t, "alice", "b")
		c.in <- roundRequest(t)
		<-g.entered             // the first round's response cannot end: it waits for the gate
		c.in <- roundRequest(t) // pipelined
		<-c.closed
		if c.code != ports.ClosePolicy {
			t.Fatalf("close code %d, want %d", c.code, ports.ClosePolicy)
		}
		g.open()
		if n := g.begun(); n != 1 {
			t.Fatalf("%d rounds begun, want only the first", n)
		}
	})
	t.Run("a request after END begins the next round", func(t *testing.T) {
		g := newGatedRounds()
		g.open()
		f := newFixture(t, realtime.Options{Rounds: g})
		c, _ := f.connect(t, "alice", "b")
		c.in <- roundRequest(t)
		roundEnd(t, c)
		c.in <- roundRequest(t)
		roundEnd(t, c)
		select {
		case <-c.closed:
			t.Fatalf("the socket closed with %d after two sequential rounds", c.code)
		default:
		}
		if n := g.begun(); n != 2 {
			t.Fatalf("%d rounds begun, want 2", n)
		}
	})
}

// closingConn is a socket whose close handshake never completes: Close
// is recorded, and Read goes on delivering what the peer sent until the
// test ends the stream (a real socket keeps reading until the peer's
// close frame or the handshake's own timeout).
type closingConn struct {
	in     chan ports.RealtimeMessage
	closes chan int
}

func (c *closingConn) Read(ctx context.Context) (ports.RealtimeMessage, error) {
	select {
	case m, ok := <-c.in:
		if !ok {
			return ports.RealtimeMessage{}, io.EOF
		}
		return m, nil
	case <-ctx.Done():
		return ports.RealtimeMessage{}, ctx.Err()
	}
}
func (c *closingConn) Write(context.Context, ports.RealtimeMessage) error { return nil }
func (c *closingConn) Ping(context.Context) error                         { return nil }
func (c *closingConn) Close(code int, _ string) error {
	c.closes <- code
	return nil
}

// Nothing the client sends after a violation is processed (SPEC §8.7:
// MUST NOT process), even while the peer has not answered the close.
func TestNothingIsProcessedAfterAViolation(t *testing.T) {
	g := newGatedRounds()
	g.open()
	f := newFixture(t, realtime.Options{Rounds: g})
	adm, err := f.hub.Admit(context.Background(), ports.Identity{Partition: "p", ActorID: "alice"}, "b")
	if err != nil {
		t.Fatal(err)
	}
	c := &closingConn{in: make(chan ports.RealtimeMessage, 2), closes: make(chan int, 1)}
	c.in <- ports.RealtimeMessage{Binary: true, Data: []byte{0x07}} // an unknown channel tag
	c.in <- roundRequest(t)
	close(c.in)
	adm.Run(context.Background(), c)
	if code := <-c.closes; code != ports.ClosePolicy {
		t.Fatalf("close code %d, want %d", code, ports.ClosePolicy)
	}
	if n := g.begun(); n != 0 {
		t.Fatalf("%d rounds begun after the violation, want none", n)
	}
}

// pushRounds answers every round as if it applied one commit: the commit
// is appended to the store (no notice is published for it) and the
// response carries its PUSH_RESULT.
type pushRounds struct{ st *fakeStore }

func (p pushRounds) Handle(context.Context, ports.Identity, []byte) (*round.Response, error) {
	seq := p.st.commit("alice")
	return &round.Response{WireVersion: 3, Frames: []ssp2.Frame{
		&ssp2.RespHeader{LogEpoch: "e1"},
		&ssp2.PushResult{ClientCommitID: "k1", Status: ssp2.PushApplied, CommitSeq: seq, Results: []ssp2.OpResult{{Status: ssp2.OpApplied}}},
	}}, nil
}

// untilRoundEnd reads the session's messages up to the round's END and
// returns the wake-ups read on the way; a delta fails the test.
func untilRoundEnd(t *testing.T, c *fakeConn) []*domrt.Wake {
	t.Helper()
	var stream []byte
	var wakes []*domrt.Wake
	for {
		m := c.next(t)
		switch {
		case !m.Binary:
			e, err := domrt.ParseServerEvent(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			if w, ok := e.(*domrt.Wake); ok {
				wakes = append(wakes, w)
			}
		case m.Data[0] == domrt.TagDelta:
			t.Fatalf("a delta during a socket round: %x", m.Data)
		default:
			stream = append(stream, m.Data[1:]...)
			if _, err := ssp2.Decode(stream); err == nil {
				return wakes
			}
		}
	}
}

// SPEC §8.7 "Interleaving" and §8.2: no delta goes out while a round's
// response stream is in flight. A matching commit in that window is a
// catchup-required wake-up, and deltas stay suppressed until an ack
// covers what the connection observed.
func TestACommitDuringARoundIsAWakeUp(t *testing.T) {
	g := newGatedRounds()
	f := newFixture(t, realtime.Options{Rounds: g})
	c, _ := f.connect(t, "alice", "b")
	c.in <- roundRequest(t)
	<-g.entered // the round's response waits for the gate
	f.publish(f.st.commit("alice"))
	wantWake(t, c, domrt.WakeCatchupRequired, 1)
	g.open()
	if w := untilRoundEnd(t, c); len(w) != 0 {
		t.Fatalf("wake-ups after the first: %+v", w)
	}
	// Still suppressed after the round: the next commit is a wake-up too.
	f.publish(f.st.commit("alice"))
	wantWake(t, c, domrt.WakeCatchupRequired, 2)
}

// A round's own commits are observed by its session as they apply: no
// delta may carry them once the response is out, so the session answers
// with a catchup-required wake-up at the round's seq and suppresses
// deltas until an ack covers it (SPEC §8.2, §8.7).
func TestARoundsOwnCommitsWakeTheSession(t *testing.T) {
	f := newFixture(t, realtime.Options{})
	f.hub = f.rebuild(t, realtime.Options{Store: f.st, Rounds: pushRounds{st: f.st}})
	c, _ := f.connect(t, "alice", "b")
	c.in <- roundRequest(t)
	wakes := untilRoundEnd(t, c)
	// The round's notice, arriving late, adds nothing; a later commit is
	// a wake-up (suppressed), not a delta.
	f.publish(1)
	f.publish(f.st.commit("alice"))
	for len(wakes) == 0 || wakes[len(wakes)-1].Cursor < 2 {
		wakes = append(wakes, nextWake(t, c))
	}
	var got []string
	for _, w := range wakes {
		got = append(got, fmt.Sprint(w.Reason, "@", w.Cursor))
	}
	if want := "[catchup-required@1 catchup-required@2]"; fmt.Sprint(got) != want {
		t.Fatalf("wake-ups %v, want %s: the round's own seq, then the next commit's", got, want)
	}
}

func nextWake(t *testing.T, c *fakeConn) *domrt.Wake {
	t.Helper()
	w, ok := c.event(t).(*domrt.Wake)
	if !ok {
		t.Fatalf("want a wake-up, got %+v", w)
	}
	return w
}

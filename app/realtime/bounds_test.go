package realtime_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/app/realtime"
	domrt "github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// budget is a ports.Inflight with maxBytes of memory and, unless noSlots,
// any number of processing slots.
type budget struct {
	maxBytes int64
	noSlots  bool

	mu   sync.Mutex
	used int64
}

func (b *budget) Share() ports.InflightShare { return &budgetShare{b: b} }

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

type budgetShare struct {
	b     *budget
	bytes int64
}

func (s *budgetShare) Reserve(n int64) error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.b.used+n > s.b.maxBytes {
		return syncerr.New(syncerr.RateLimited)
	}
	s.b.used += n
	s.bytes += n
	return nil
}

func (s *budgetShare) Unreserve(n int64) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.used -= n
	s.bytes -= n
}

func (s *budgetShare) Acquire() error {
	if s.b.noSlots {
		return syncerr.New(syncerr.RateLimited)
	}
	return nil
}

func (s *budgetShare) Release() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.used -= s.bytes
	s.bytes = 0
}

// awaitClose waits for the session to close c and returns the code.
func awaitClose(t *testing.T, c *fakeConn) int {
	t.Helper()
	select {
	case <-c.closed:
		return c.code
	case <-time.After(30 * time.Second):
		t.Fatal("the socket was not closed")
		return 0
	}
}

// chunk is a 0x01 round message carrying b.
func chunk(b []byte) ports.RealtimeMessage {
	return ports.RealtimeMessage{Binary: true, Data: append([]byte{domrt.TagRound}, b...)}
}

// A socket round is a request like POST /sync: bounded in size, in the
// time it takes to arrive once begun, and in the node's in-flight memory
// and processing slots. Each bound closes the socket with its code before
// the round can hold more.
func TestSocketRoundBounds(t *testing.T) {
	req := roundRequest(t).Data[1:]
	// A frame header declaring a frame far past any bound.
	huge := append(append([]byte(nil), req[:ssp2.HeaderSize]...), byte(ssp2.TypeReqHeader), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(huge[ssp2.HeaderSize+1:], 1<<30)
	// A frame of 50 bytes, fitting in 64 with the header, then more.
	frame50 := append(append([]byte(nil), req[:ssp2.HeaderSize]...), byte(ssp2.TypeReqHeader), 50, 0, 0, 0)
	immediate := func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	cases := []struct {
		name  string
		o     realtime.Options
		send  []ports.RealtimeMessage
		close int
	}{
		{"a request past the size bound", realtime.Options{MaxRequestBytes: int64(len(req) - 1)},
			[]ports.RealtimeMessage{chunk(req)}, ports.CloseTooBig},
		{"chunks adding up past the size bound", realtime.Options{MaxRequestBytes: 64},
			[]ports.RealtimeMessage{chunk(frame50), chunk(make([]byte, 25)), chunk(make([]byte, 25)), chunk(make([]byte, 10))}, ports.CloseTooBig},
		{"a frame declared past the size bound", realtime.Options{MaxRequestBytes: 1 << 20},
			[]ports.RealtimeMessage{chunk(huge)}, ports.CloseTooBig},
		{"a request that stops arriving", realtime.Options{RoundTimeout: time.Second, Sleep: immediate},
			[]ports.RealtimeMessage{chunk(req[:ssp2.HeaderSize+3])}, ports.ClosePolicy},
		{"a request the in-flight memory cannot hold", realtime.Options{Inflight: &budget{maxBytes: 8}},
			[]ports.RealtimeMessage{chunk(req[:ssp2.HeaderSize+3])}, ports.CloseTryAgainLater},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.o)
			c, _ := f.connect(t, "alice", "b")
			for _, m := range tc.send {
				select {
				case c.in <- m:
				case <-c.closed:
				}
			}
			if code := awaitClose(t, c); code != tc.close {
				t.Fatalf("closed with %d, want %d", code, tc.close)
			}
		})
	}
}

// A whole round within the bounds holds its bytes on the node's budget
// only until it is served.
func TestSocketRoundGivesItsMemoryBack(t *testing.T) {
	b := &budget{maxBytes: 1 << 20}
	g := newGatedRounds()
	f := newFixture(t, realtime.Options{Inflight: b, Rounds: g, RoundTimeout: time.Minute})
	c, _ := f.connect(t, "alice", "b")
	c.in <- roundRequest(t)
	<-g.entered
	if b.inUse() == 0 {
		t.Fatal("a round being served holds nothing on the budget")
	}
	g.open()
	roundEnd(t, c)
	for deadline := time.Now().Add(30 * time.Second); b.inUse() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held after the round", b.inUse())
		}
	}
}

// No processing slot free: the round is answered sync.rate_limited, as
// POST /sync would be, and the socket stays open.
func TestSocketRoundWithoutASlotIsRefused(t *testing.T) {
	g := newGatedRounds()
	g.open()
	f := newFixture(t, realtime.Options{Inflight: &budget{maxBytes: 1 << 20, noSlots: true}, Rounds: g})
	c, _ := f.connect(t, "alice", "b")
	c.in <- roundRequest(t)
	var stream []byte
	for {
		m := c.next(t)
		if !m.Binary {
			continue
		}
		stream = append(stream, m.Data[1:]...)
		if msg, err := ssp2.Decode(stream); err == nil {
			var code string
			for _, fr := range msg.Frames {
				if e, ok := fr.(*ssp2.Error); ok {
					code = e.Code
				}
			}
			if code != string(syncerr.RateLimited) {
				t.Fatalf("refused round answered %q, want %s", code, syncerr.RateLimited)
			}
			break
		}
	}
	if g.begun() != 0 {
		t.Fatal("a round without a slot was served")
	}
	select {
	case <-c.closed:
		t.Fatal("a refused round closed the socket")
	default:
	}
}

// An ack is a cursor the client holds: one past anything this node has
// seen cannot have been delivered and is stored clamped; a negative one
// is nonsense and closes the socket.
func TestAckIsClamped(t *testing.T) {
	f := newFixture(t, realtime.Options{})
	f.st.commit("alice")
	f.st.commit("alice")
	c, _ := f.connect(t, "alice", "b")
	c.in <- ports.RealtimeMessage{Data: []byte(`{"type":"ack","cursor":9007199254740991}`)}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		f.st.mu.Lock()
		acks := append([]ports.CursorAdvance(nil), f.st.acks...)
		f.st.mu.Unlock()
		if len(acks) > 0 {
			if acks[0].Cursor != 2 {
				t.Fatalf("stored ack %d, want the head 2", acks[0].Cursor)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ack was never stored")
		}
	}
	c.in <- ports.RealtimeMessage{Data: []byte(`{"type":"ack","cursor":-5}`)}
	if code := awaitClose(t, c); code != ports.ClosePolicy {
		t.Fatalf("a negative ack closed with %d, want %d", code, ports.ClosePolicy)
	}
}

// Publishes past a socket's presence rate are held, the latest winning,
// and reach the scope-mates once the rate allows: a flood costs them one
// message per interval, and the final document still arrives.
func TestPresencePastTheRateIsHeld(t *testing.T) {
	w := newPresenceWorld(t, map[string]string{"a": "alice", "b": "alice"})
	clk := clock.NewVirtual(1_000_000)
	wake := make(chan struct{})
	sleep := func(ctx context.Context, _ time.Duration) error {
		select {
		case <-wake:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h := w.hub(realtime.Options{Now: clk.Now, Sleep: sleep, PresenceRate: 1, PresenceBurst: 1})
	a, _ := w.open(h, "a")
	b, _ := w.open(h, "b")
	publish(a, "user:alice", `{"cursor":1}`)
	wantPresence(t, b, domrt.PresenceJoin, "a", `{"cursor":1}`)
	for i := 2; i <= 50; i++ {
		publish(a, "user:alice", `{"cursor":`+itoa(i)+`}`)
	}
	nothingBefore(t, a) // a's publishes are processed
	nothingBefore(t, b) // and none reached b
	if _, err := clk.Advance(1000); err != nil {
		t.Fatal(err)
	}
	wake <- struct{}{}
	wantPresence(t, b, domrt.PresenceUpdate, "a", `{"cursor":50}`)
	nothingBefore(t, b)
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

// A round as large as the whole in-flight budget still arrives, in
// chunks of any size: the budget holds the bytes that came, not the
// slack of a buffer that doubles without knowing the request's length.
func TestSocketRoundAsLargeAsTheBudget(t *testing.T) {
	req := []byte(nil)
	req = append(req, roundRequest(t).Data[1:1+ssp2.HeaderSize]...)
	body := make([]byte, 64<<10)
	for range 48 {
		req = append(req, byte(ssp2.TypeReqHeader))
		req = binary.LittleEndian.AppendUint32(req, uint32(len(body)))
		req = append(req, body...)
	}
	req = append(req, byte(ssp2.TypeEnd), 0, 0, 0, 0)
	b := &budget{maxBytes: int64(len(req))}
	g := newGatedRounds()
	g.open()
	f := newFixture(t, realtime.Options{Inflight: b, Rounds: g, MaxRequestBytes: int64(len(req))})
	c, _ := f.connect(t, "alice", "b")
	for off := 0; off < len(req); off += 50_000 {
		select {
		case c.in <- chunk(req[off:min(off+50_000, len(req))]):
		case <-c.closed:
			t.Fatalf("closed with %d after %d of %d bytes", c.code, off, len(req))
		}
	}
	roundEnd(t, c)
	if g.begun() != 1 {
		t.Fatalf("%d rounds served", g.begun())
	}
}

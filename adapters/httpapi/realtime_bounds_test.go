package httpapi_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/ports"
)

// closer is an admission that reads messages until the transport refuses
// one, and closes the socket as the realtime session does: with the
// refusal's code.
type closer struct{ got chan []byte }

func (closer) Abort() {}

func (a closer) Run(ctx context.Context, c ports.RealtimeConn) {
	for {
		m, err := c.Read(ctx)
		if ce, ok := errors.AsType[*ports.RealtimeCloseError](err); ok {
			_ = c.Close(ce.Code, ce.Reason)
			return
		}
		if err != nil {
			return
		}
		a.got <- m.Data
	}
}

// sendFrame writes one masked frame of any length (RFC 6455 §5.2); fin
// false leaves the message unfinished.
func (p *rawPeer) sendFrame(t *testing.T, op byte, fin bool, payload []byte) {
	t.Helper()
	h := op
	if fin {
		h |= 0x80
	}
	f := []byte{h}
	switch n := len(payload); {
	case n <= 125:
		f = append(f, 0x80|byte(n))
	case n <= 0xffff:
		f = append(f, 0x80|126, byte(n>>8), byte(n))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	mask := [4]byte{1, 2, 3, 4}
	f = append(f, mask[:]...)
	for i, b := range payload {
		f = append(f, b^mask[i%4])
	}
	if _, err := p.conn.Write(f); err != nil {
		t.Fatal(err)
	}
}

// closeCode reads server frames up to the close frame and returns its code.
func (p *rawPeer) closeCode(t *testing.T) int {
	t.Helper()
	for {
		op, payload, err := p.frame()
		if err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		if op == 0x8 {
			if len(payload) < 2 {
				t.Fatalf("close frame without a code")
			}
			return int(binary.BigEndian.Uint16(payload))
		}
	}
}

// Every client message is bounded by its kind's size, by a deadline once
// it has begun, and by the node's in-flight memory: a refusal closes the
// socket with its code before the message can hold more.
func TestRealtimeMessageBounds(t *testing.T) {
	const (
		opText   = 0x1
		opBinary = 0x2
	)
	immediate := func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	tight, err := httpapi.NewLimiter(httpapi.LimiterOptions{MaxRequests: 1, MaxBodyBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		o    httpapi.RealtimeOptions
		op   byte
		fin  bool
		size int
		code int
	}{
		{"a text message past the control bound", httpapi.RealtimeOptions{MaxMessageBytes: 1 << 20, MaxTextBytes: 100}, opText, true, 200, ports.CloseTooBig},
		{"a binary message past its bound", httpapi.RealtimeOptions{MaxMessageBytes: 100}, opBinary, true, 200, ports.CloseTooBig},
		{"a message the in-flight memory cannot hold", httpapi.RealtimeOptions{MaxMessageBytes: 1 << 20, Inflight: tight}, opBinary, true, 5000, ports.CloseTryAgainLater},
		{"a message begun and never finished", httpapi.RealtimeOptions{MaxMessageBytes: 1 << 20, MessageTimeout: time.Second, Sleep: immediate}, opBinary, false, 10, ports.ClosePolicy},
	}
	auth := authFunc(func(*http.Request) (ports.Identity, error) {
		return ports.Identity{Partition: "p", ActorID: "alice"}, nil
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := closer{got: make(chan []byte, 1)}
			admit := func(context.Context, ports.Identity, string) (ports.RealtimeAdmission, error) { return a, nil }
			srv := httptest.NewServer(httpapi.RealtimeEndpoint(auth, tc.o, admit))
			defer srv.Close()
			p := dialRaw(t, srv, "/realtime?clientId=c1")
			p.sendFrame(t, tc.op, tc.fin, bytes.Repeat([]byte{'x'}, tc.size))
			if code := p.closeCode(t); code != tc.code {
				t.Fatalf("closed with %d, want %d", code, tc.code)
			}
			select {
			case m := <-a.got:
				t.Fatalf("a refused message of %d bytes was delivered", len(m))
			default:
			}
		})
	}
	if _, b := tight.InUse(); b != 0 {
		t.Fatalf("%d bytes still held on the budget after the sockets closed", b)
	}
}

// A message within the bounds is delivered whole, and its bytes return
// to the budget once it is.
func TestRealtimeMessageWithinBounds(t *testing.T) {
	lim, err := httpapi.NewLimiter(httpapi.LimiterOptions{MaxRequests: 1, MaxBodyBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	auth := authFunc(func(*http.Request) (ports.Identity, error) {
		return ports.Identity{Partition: "p", ActorID: "alice"}, nil
	})
	a := closer{got: make(chan []byte, 1)}
	admit := func(context.Context, ports.Identity, string) (ports.RealtimeAdmission, error) { return a, nil }
	srv := httptest.NewServer(httpapi.RealtimeEndpoint(auth, httpapi.RealtimeOptions{
		MaxMessageBytes: 1 << 20, MaxTextBytes: 100, MessageTimeout: time.Minute, Inflight: lim}, admit))
	defer srv.Close()
	p := dialRaw(t, srv, "/realtime?clientId=c1")
	// One message in two frames: the deadline is for the whole message.
	p.sendFrame(t, 0x2, false, bytes.Repeat([]byte{'a'}, 30_000))
	p.sendFrame(t, 0x0, true, bytes.Repeat([]byte{'b'}, 30_000))
	select {
	case m := <-a.got:
		if len(m) != 60_000 || m[0] != 'a' || m[59_999] != 'b' {
			t.Fatalf("delivered %d bytes", len(m))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not delivered")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, b := lim.InUse(); b == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delivered message's bytes were never given back")
		}
	}
}

// One message nearly as large as the budget is delivered: the budget
// holds the bytes that came, not a doubling buffer's slack.
func TestRealtimeMessageAsLargeAsTheBudget(t *testing.T) {
	lim, err := httpapi.NewLimiter(httpapi.LimiterOptions{MaxRequests: 1, MaxBodyBytes: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	auth := authFunc(func(*http.Request) (ports.Identity, error) {
		return ports.Identity{Partition: "p", ActorID: "alice"}, nil
	})
	a := closer{got: make(chan []byte, 1)}
	admit := func(context.Context, ports.Identity, string) (ports.RealtimeAdmission, error) { return a, nil }
	srv := httptest.NewServer(httpapi.RealtimeEndpoint(auth, httpapi.RealtimeOptions{MaxMessageBytes: 1 << 20, Inflight: lim}, admit))
	defer srv.Close()
	p := dialRaw(t, srv, "/realtime?clientId=c1")
	p.sendFrame(t, 0x2, true, bytes.Repeat([]byte{'m'}, 999_000))
	select {
	case m := <-a.got:
		if len(m) != 999_000 {
			t.Fatalf("delivered %d bytes", len(m))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not delivered")
	}
}

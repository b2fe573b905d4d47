package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// RealtimeOptions configure a realtime connection.
type RealtimeOptions struct {
	// ChunkBytes is the size of the 0x01 chunks a round's request is sent
	// in (default 64 KiB).
	ChunkBytes int
	// IdleTimeout ends the connection when nothing (not even a heartbeat)
	// arrived for this long; 0 never does. Set it above the server's
	// heartbeat interval to notice a server that went away silently.
	IdleTimeout time.Duration
	// HTTP is the client of the upgrade request (default: a fresh one; a
	// client with a Timeout cannot carry a socket).
	HTTP *http.Client
}

// Realtime is the client's connection to GET /realtime (SPEC §8). While it
// is open, every Push, Pull and Sync of the Client is a socket round
// (§8.7) instead of a POST /sync. A background reader keeps the socket
// answered (pings, close); deltas and wake-ups are applied only in the
// caller's goroutine, by Next and by the rounds, so the Client stays
// single-threaded.
type Realtime struct {
	c     *Client
	conn  *websocket.Conn
	o     RealtimeOptions
	hello *realtime.Hello

	mu    sync.Mutex
	queue []inbound
	err   error // why the reader ended
	sig   chan struct{}
	done  chan struct{}
	stop  context.CancelFunc
	beats atomic.Int64

	wake   *realtime.Wake // a wake-up seen inside a round, not yet served
	events []Event        // control events seen inside a round
}

type inbound struct {
	typ  websocket.MessageType
	data []byte
}

// Event is what Next handled.
type Event struct {
	// Delta is the applied delta (§8.2); it has been acknowledged.
	Delta *Result
	// Wake is a wake-up (§8.3); Round is the sync round it ran.
	Wake  *realtime.Wake
	Round *Result
	// Control is any other control message (presence, unknown events).
	Control realtime.Message
}

// ErrRealtimeClosed is returned by a realtime call after the socket ended.
var ErrRealtimeClosed = errors.New("client: realtime connection closed")

// realtimeURL maps the sync base URL to its realtime route.
func realtimeURL(base, clientID string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("client: base URL: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("client: base URL scheme %q: want http or https", u.Scheme)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/realtime"
	q := u.Query()
	q.Set("clientId", clientID)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Connect opens the realtime channel with the client's authentication
// headers and waits for hello. A refusal before the upgrade is an
// *HTTPError with its catalog code. The Client then runs its rounds over
// the socket until Close (or until the socket ends).
func (c *Client) Connect(ctx context.Context, o RealtimeOptions) (*Realtime, error) {
	if c.rt != nil {
		c.rt.Close()
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 64 << 10
	}
	u, err := realtimeURL(c.o.BaseURL, c.o.ClientID)
	if err != nil {
		return nil, err
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: c.o.Header.Clone(), HTTPClient: o.HTTP})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var b []byte
			if resp.Body != nil {
				b, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
			}
			return nil, httpError(resp.StatusCode, b)
		}
		return nil, fmt.Errorf("client: GET /realtime: %w", err)
	}
	conn.SetReadLimit(c.o.MaxResponseBytes + 1)
	rctx, stop := context.WithCancel(context.Background())
	r := &Realtime{c: c, conn: conn, o: o, sig: make(chan struct{}, 1), done: make(chan struct{}), stop: stop}
	go r.read(rctx)
	m, err := r.next(ctx)
	if err == nil && (m.typ != websocket.MessageText) {
		err = errors.New("client: the first realtime message is not hello")
	}
	if err == nil {
		var ev realtime.Message
		if ev, err = realtime.ParseServerEvent(m.data); err == nil {
			if h, ok := ev.(*realtime.Hello); ok {
				r.hello = h
			} else {
				err = fmt.Errorf("client: the first realtime message is %T, not hello", ev)
			}
		}
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	c.rt = r
	return r, nil
}

// Realtime returns the open realtime connection, or nil.
func (c *Client) Realtime() *Realtime {
	if c.rt != nil && c.rt.Err() != nil {
		c.rt = nil
	}
	return c.rt
}

// Hello returns the connection's hello.
func (r *Realtime) Hello() *realtime.Hello { return r.hello }

// Heartbeats returns how many heartbeats arrived.
func (r *Realtime) Heartbeats() int64 { return r.beats.Load() }

// Err returns why the socket ended, or nil while it is open.
func (r *Realtime) Err() error {
	select {
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	default:
		return nil
	}
}

// Close closes the socket (normal closure) and detaches it from the
// Client, whose rounds go back to POST /sync.
func (r *Realtime) Close() {
	if r.c.rt == r {
		r.c.rt = nil
	}
	_ = r.conn.Close(websocket.StatusNormalClosure, "")
	r.stop()
	<-r.done
}

// read is the background reader: it keeps control frames answered and
// queues messages for the caller. Heartbeats are only counted.
func (r *Realtime) read(ctx context.Context) {
	defer close(r.done)
	for {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if r.o.IdleTimeout > 0 {
			rctx, cancel = context.WithTimeout(ctx, r.o.IdleTimeout)
		}
		typ, b, err := r.conn.Read(rctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && rctx.Err() != nil {
				err = fmt.Errorf("client: nothing received on the realtime socket for %v: %w", r.o.IdleTimeout, err)
			}
			r.mu.Lock()
			r.err = fmt.Errorf("%w: %w", ErrRealtimeClosed, err)
			r.mu.Unlock()
			return
		}
		if typ == websocket.MessageText && strings.Contains(string(b), `"heartbeat"`) {
			if m, err := realtime.ParseServerEvent(b); err == nil {
				if _, ok := m.(*realtime.Heartbeat); ok {
					r.beats.Add(1)
					continue
				}
			}
		}
		r.mu.Lock()
		r.queue = append(r.queue, inbound{typ: typ, data: b})
		r.mu.Unlock()
		select {
		case r.sig <- struct{}{}:
		default:
		}
	}
}

// poll returns a queued message without waiting.
func (r *Realtime) poll() (inbound, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return inbound{}, false
	}
	m := r.queue[0]
	r.queue[0] = inbound{}
	r.queue = r.queue[1:]
	return m, true
}

// next waits for the next queued message.
func (r *Realtime) next(ctx context.Context) (inbound, error) {
	for {
		if m, ok := r.poll(); ok {
			return m, nil
		}
		select {
		case <-r.sig:
		case <-r.done:
			if m, ok := r.poll(); ok {
				return m, nil
			}
			return inbound{}, r.Err()
		case <-ctx.Done():
			return inbound{}, ctx.Err()
		}
	}
}

// Next handles the next server message and reports it: a delta is
// applied like pulled commits and acknowledged; a wake-up (catchup-required,
// delta-too-large, reset-required) runs a pull round and acknowledges its
// cursor; other control messages are returned as they are. Heartbeats are
// answered by the reader and never returned.
func (r *Realtime) Next(ctx context.Context) (Event, error) {
	for {
		if len(r.events) > 0 {
			ev := r.events[0]
			r.events = r.events[1:]
			return ev, nil
		}
		if w := r.wake; w != nil {
			r.wake = nil
			if r.covered(w.Cursor) {
				// The replica already holds what the wake-up announces
				// (a round got there first): the ack lifts the suppression.
				if err := r.ack(ctx, w.Cursor); err != nil {
					return Event{}, err
				}
				continue
			}
			res, err := r.c.Sync(ctx)
			return Event{Wake: w, Round: res}, err
		}
		m, err := r.next(ctx)
		if err != nil {
			return Event{}, err
		}
		ev, err := r.handle(ctx, m)
		if err != nil || ev != nil {
			if ev == nil {
				return Event{}, err
			}
			return *ev, err
		}
	}
}

// handle applies a message outside a round: deltas at once, wake-ups
// recorded (coalesced) for a round, other events returned.
func (r *Realtime) handle(ctx context.Context, m inbound) (*Event, error) {
	if m.typ == websocket.MessageBinary {
		if len(m.data) == 0 || m.data[0] != realtime.TagDelta {
			return nil, fmt.Errorf("client: unexpected realtime binary message outside a round")
		}
		res, err := r.applyDelta(ctx, m.data[1:])
		if err != nil {
			return nil, err
		}
		return &Event{Delta: res}, nil
	}
	ev, err := realtime.ParseServerEvent(m.data)
	if err != nil {
		return nil, fmt.Errorf("client: realtime event: %w", err)
	}
	if w, ok := ev.(*realtime.Wake); ok {
		if r.wake == nil || w.Cursor > r.wake.Cursor {
			r.wake = w
		}
		return nil, nil
	}
	return &Event{Control: ev}, nil
}

// applyDelta applies a delta (one complete SSP2 response) and acks its
// cursor. Sections the replica is already past, or cannot take (a
// subscription mid-bootstrap or unknown), are skipped: a delta queued
// before a round may arrive after the round brought the same commits.
func (r *Realtime) applyDelta(ctx context.Context, b []byte) (*Result, error) {
	c := r.c
	msg, err := ssp2.DecodeWith(b, ssp2.DecodeOptions{MaxMessageBytes: c.o.MaxResponseBytes})
	if err != nil {
		return nil, fmt.Errorf("client: decode delta: %w", err)
	}
	if msg.Kind != ssp2.KindResponse {
		return nil, fmt.Errorf("client: delta message has kind %v", msg.Kind)
	}
	c.stats.Deltas++
	c.stats.DeltaBytes += int64(len(b))
	// Each section's SUB_END carries the delta's cursor; find it first.
	keep := make([]ssp2.Frame, 0, len(msg.Frames))
	sent := map[string]reqSub{}
	var through int64 = -1
	var sec []ssp2.Frame
	var sub *Subscription
	for _, f := range msg.Frames {
		switch f := f.(type) {
		case *ssp2.SubStart:
			sub, sec = c.subs[f.ID], []ssp2.Frame{f}
		case *ssp2.SubEnd:
			through = max(through, f.NextCursor)
			sec = append(sec, f)
			if sub != nil && sub.Cursor >= 0 && sub.BootstrapState == "" && sub.Cursor < f.NextCursor {
				keep = append(keep, sec...)
				sent[sub.ID] = reqSub{cursor: sub.Cursor}
			}
			sub, sec = nil, nil
		default:
			if sec != nil {
				sec = append(sec, f)
			} else {
				keep = append(keep, f)
			}
		}
	}
	msg.Frames = keep
	res, err := c.apply(ctx, msg, sent)
	if err != nil {
		return res, err
	}
	if through >= 0 {
		err = r.ack(ctx, through)
	}
	return res, err
}

// ack sends {"type":"ack","cursor":n} (§8.2).
func (r *Realtime) ack(ctx context.Context, cursor int64) error {
	text, err := realtime.Encode(&realtime.Ack{Cursor: cursor})
	if err != nil {
		return err
	}
	if err := r.conn.Write(ctx, websocket.MessageText, text); err != nil {
		return fmt.Errorf("client: realtime ack: %w", err)
	}
	return nil
}

// covered reports whether every active subscription is at cursor or
// past it, with no bootstrap in progress.
func (r *Realtime) covered(cursor int64) bool {
	if !r.c.Settled() {
		return false
	}
	n := 0
	for _, s := range r.c.subs {
		if s.Status == ssp2.SubActive {
			n++
			if s.Cursor < cursor {
				return false
			}
		}
	}
	return n > 0
}

// afterRound acknowledges the pull round's cursor and drops a wake-up
// the round satisfied.
func (r *Realtime) afterRound(ctx context.Context) error {
	if w := r.wake; w != nil && r.covered(w.Cursor) {
		r.wake = nil
	}
	return r.ackRound(ctx)
}

// ackRound acknowledges the cursor a pull round reached, which lifts the
// server's delta suppression after a wake-up (§8.2).
func (r *Realtime) ackRound(ctx context.Context) error {
	c := r.c
	if !c.Settled() {
		return nil
	}
	var cur int64 = -1
	for _, s := range c.subs {
		if s.Status == ssp2.SubActive {
			cur = max(cur, s.Cursor)
		}
	}
	if cur < 0 {
		return nil
	}
	return r.ack(ctx, cur)
}

// round runs one sync round over the socket (§8.7): the request in 0x01
// chunks, the response reassembled from the 0x01 chunks until its END
// frame. Deltas arriving meanwhile are applied in order; wake-ups and
// other events are kept for Next.
func (r *Realtime) round(ctx context.Context, body []byte) ([]byte, error) {
	// Messages that arrived since the last call come first, in order.
	for {
		m, ok := r.poll()
		if !ok {
			break
		}
		if err := r.inRound(ctx, m); err != nil {
			return nil, err
		}
	}
	for off := 0; off < len(body); off += r.o.ChunkBytes {
		part := body[off:min(off+r.o.ChunkBytes, len(body))]
		chunk := append(make([]byte, 0, len(part)+1), realtime.TagRound)
		if err := r.conn.Write(ctx, websocket.MessageBinary, append(chunk, part...)); err != nil {
			return nil, fmt.Errorf("client: realtime round: %w", err)
		}
	}
	var rs responseScanner
	for {
		m, err := r.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("client: realtime round: %w", err)
		}
		if m.typ != websocket.MessageBinary || len(m.data) == 0 || m.data[0] != realtime.TagRound {
			if err := r.inRound(ctx, m); err != nil {
				return nil, err
			}
			continue
		}
		out, done, err := rs.push(m.data[1:], r.c.o.MaxResponseBytes)
		if err != nil {
			return nil, fmt.Errorf("client: realtime round: %w", err)
		}
		if done {
			return out, nil
		}
	}
}

// inRound handles a non-round message received around a round.
func (r *Realtime) inRound(ctx context.Context, m inbound) error {
	if m.typ == websocket.MessageBinary && len(m.data) > 0 && m.data[0] == realtime.TagRound {
		return errors.New("client: a round chunk outside a round")
	}
	ev, err := r.handle(ctx, m)
	if err != nil {
		return err
	}
	if ev != nil && ev.Delta == nil {
		r.events = append(r.events, *ev)
	}
	return nil
}

// responseScanner finds the END of a response stream: the envelope is
// self-delimiting (8-byte header, then type+u32 length frames).
type responseScanner struct {
	buf []byte
	off int
}

func (s *responseScanner) push(chunk []byte, limit int64) ([]byte, bool, error) {
	s.buf = append(s.buf, chunk...)
	if int64(len(s.buf)) > limit {
		return nil, false, fmt.Errorf("response stream larger than %d bytes", limit)
	}
	if s.off == 0 {
		if len(s.buf) < ssp2.HeaderSize {
			return nil, false, nil
		}
		if string(s.buf[:4]) != ssp2.Magic || ssp2.Kind(s.buf[6]) != ssp2.KindResponse {
			return nil, false, errors.New("not an SSP2 response stream")
		}
		s.off = ssp2.HeaderSize
	}
	for len(s.buf)-s.off >= 5 {
		t := ssp2.FrameType(s.buf[s.off])
		n := int(binary.LittleEndian.Uint32(s.buf[s.off+1:]))
		if t == ssp2.TypeEnd {
			end := s.off + 5
			if end != len(s.buf) {
				return nil, false, errors.New("bytes past the response's END")
			}
			return s.buf, true, nil
		}
		if len(s.buf)-s.off-5 < n {
			break
		}
		s.off += 5 + n
	}
	return nil, false, nil
}

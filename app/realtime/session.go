package realtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Session is one realtime socket (SPEC §8). Its state is guarded by mu;
// deltas are decided by one worker goroutine per session, woken by
// notices, so a session's deltas go out in log order.
type Session struct {
	hub       *Hub
	id        ports.Identity
	clientID  string
	sessionID string
	hello     *realtime.Hello
	out       *outbox

	wakeCh chan struct{}
	target atomic.Int64 // highest noticed commit seq
	resynk atomic.Bool  // read the log bounds before the next pass
	resetq atomic.Bool  // rebase on the partition's log before the next pass
	// overflow is set by the first send-queue overflow, which closes it.
	overflow atomic.Bool
	rounds   sync.WaitGroup

	released bool // guarded by hub.mu

	scanner realtime.RequestScanner // used by the reader only
	// share holds the round being read (its buffer) and then served (a
	// processing slot) on the node's in-flight bounds; used by the reader
	// and by the round it starts, never both at once.
	share ports.InflightShare
	// roundDeadline disarms the deadline of the round being read (nil
	// when none is); used by the reader only.
	roundDeadline context.CancelFunc
	presenceRate  tokenBucket // guarded by hub.pres.mu

	mu sync.Mutex
	// cursor is the highest seq acknowledged or delivered; lastSeq the
	// highest seq observed (notices, acks, the session's own rounds).
	cursor, lastSeq int64
	// epoch is the partition's log epoch the session serves; horizon the
	// pruning horizon last read.
	epoch   string
	horizon int64
	// wakePending suppresses deltas until an ack reaches lastSeq (§8.2).
	wakePending bool
	regs        []registration
	wire        uint16
	roundActive bool
	conn        ports.RealtimeConn
	closing     bool
	// closeCode is the code the socket was closed with (first shutdown).
	closeCode int
	// closed is closed once the close handshake the first shutdown began
	// has ended (nil before).
	closed chan struct{}

	// Presence state, guarded by hub.pres.mu: the scope keys held (the
	// grant), set once hello is queued (pactive) and dropped at the end.
	pkeys          map[string]struct{}
	pactive, pdone bool
	// pheld are publishes past the socket's presence rate, latest per key;
	// pflushing says a goroutine applies them as the rate allows.
	pheld     map[string]heldPublish
	pflushing bool
}

// notify records a noticed commit seq and wakes the worker.
func (s *Session) notify(seq int64) {
	for {
		cur := s.target.Load()
		if seq <= cur || s.target.CompareAndSwap(cur, seq) {
			break
		}
	}
	signal(s.wakeCh)
}

// resync makes the worker read the log bounds: notices may have been lost.
func (s *Session) resync() {
	s.resynk.Store(true)
	signal(s.wakeCh)
}

// reset makes the worker rebase the session on the partition's log.
func (s *Session) reset() {
	s.resetq.Store(true)
	signal(s.wakeCh)
}

func (s *Session) setRegistrations(regs []registration) {
	s.mu.Lock()
	s.regs = regs
	s.mu.Unlock()
	s.seen(regs)
}

// seen counts the socket's client under the schema version of its
// registrations (syncd_clients_by_schema_version): a connected client
// that only takes deltas still counts.
func (s *Session) seen(regs []registration) {
	if len(regs) > 0 && s.hub.o.Clients != nil {
		s.hub.o.Clients.Observe(s.id.Partition, s.clientID, regs[0].version, time.UnixMilli(s.hub.nowMs()))
	}
}

// Abort implements ports.RealtimeAdmission: the upgrade failed.
func (s *Session) Abort() { s.hub.release(s) }

// Run implements ports.RealtimeAdmission: it serves the socket until
// the client leaves, a violation closes it, or the hub drains.
func (s *Session) Run(ctx context.Context, c ports.RealtimeConn) {
	defer s.hub.release(s)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.conn = c
	closing := s.closing
	s.mu.Unlock()
	if closing { // drained between admission and upgrade
		_ = c.Close(ports.CloseGoingAway, "server shutting down")
		return
	}
	// hello is the first message (§8.1): queued before anything else can be.
	text, err := realtime.Encode(s.hello)
	if err != nil {
		s.hub.log.Error("encode hello", zap.Error(err))
		_ = c.Close(ports.CloseInternal, "internal error")
		return
	}
	s.queueControl(text, "")
	if ev := s.hub.o.Events; ev != nil {
		who := event.Who{Partition: s.id.Partition, ActorID: s.id.ActorID, ClientID: s.clientID}
		ev.Emit(event.RealtimeConnected{Who: who, SessionID: s.sessionID})
		began := s.hub.o.Now()
		defer func() {
			s.mu.Lock()
			code := s.closeCode
			s.mu.Unlock()
			ev.Emit(event.RealtimeDisconnected{Who: who, SessionID: s.sessionID, CloseCode: int64(code),
				Duration: s.hub.o.Now().Sub(began)})
		}()
	}
	s.hub.presenceStart(s)
	defer s.hub.presenceEnd(s)
	var wg sync.WaitGroup
	wg.Go(func() { s.write(ctx, cancel, c) })
	wg.Go(func() { s.work(ctx) })
	if s.hub.o.Heartbeat > 0 {
		wg.Go(func() { s.heartbeat(ctx, c) })
	}
	signal(s.wakeCh) // notices that arrived before the upgrade
	s.read(ctx, c)
	s.shutdown(ports.CloseNormal, "")
	// The close frame goes out before the context ends: cancelling a
	// write or ping in flight drops the connection without it.
	<-s.closeDone()
	cancel()
	s.rounds.Wait()
	s.disarmRound()
	s.share.Release()
	s.out.close()
	wg.Wait()
}

// queueControl queues a control message; a queue that overflows closes
// the socket (the client is not reading). Callers may hold s.mu.
func (s *Session) queueControl(text []byte, wake realtime.WakeReason) {
	if !s.out.control(text, wake) {
		s.overflowed()
	}
}

// overflowed closes a socket whose send queue overflowed. It may run with
// s.mu held, so the close happens on its own goroutine.
func (s *Session) overflowed() {
	if !s.overflow.CompareAndSwap(false, true) {
		return // closing already: the queue stays open until Run ends
	}
	if m := s.hub.o.Metrics; m != nil {
		m.Overflow()
	}
	go s.violation(ports.ClosePolicy, string(syncerr.RateLimited)+": send queue full; the client is not reading")
}

// shutdown closes the socket once with code; the reader then ends Run.
func (s *Session) shutdown(code int, reason string) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.closing = true
	s.closeCode = code
	c := s.conn
	done := make(chan struct{})
	s.closed = done
	s.mu.Unlock()
	if c == nil {
		close(done)
		return
	}
	// Close waits (bounded) for the peer's close frame: the caller does
	// not wait for it; Run does, before it ends the session's context.
	go func() {
		defer close(done)
		_ = c.Close(code, reason)
	}()
}

// closeDone is closed once the socket's close handshake has ended.
func (s *Session) closeDone() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Session) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// violation closes the socket for a broken client (§8.7: pipelined
// rounds, unframed streams, unknown tags; §8.1: malformed control).
func (s *Session) violation(code int, why string) {
	s.hub.log.Debug("realtime protocol violation; closing the socket",
		zap.String("partition", s.id.Partition), zap.String("client_id", s.clientID), zap.String("reason", why))
	if len(why) > 120 {
		why = why[:120]
	}
	s.shutdown(code, why)
}

func (s *Session) write(ctx context.Context, cancel context.CancelFunc, c ports.RealtimeConn) {
	for {
		m, err := s.out.take(ctx)
		if err != nil {
			return
		}
		wctx, wcancel := context.WithTimeout(ctx, s.hub.o.WriteTimeout)
		err = c.Write(wctx, m)
		wcancel()
		if err != nil {
			s.hub.log.Debug("realtime write failed", zap.String("client_id", s.clientID), zap.Error(err))
			s.shutdown(ports.ClosePolicy, "write timeout")
			cancel()
			return
		}
	}
}

func (s *Session) heartbeat(ctx context.Context, c ports.RealtimeConn) {
	for {
		if err := s.hub.o.Sleep(ctx, s.hub.o.Heartbeat); err != nil {
			return
		}
		if text, err := realtime.Encode(&realtime.Heartbeat{Timestamp: s.hub.nowMs()}); err == nil {
			s.queueControl(text, "")
		}
		if s.hub.o.IdleTimeout > 0 {
			pctx, pcancel := context.WithTimeout(ctx, s.hub.o.IdleTimeout)
			err := c.Ping(pctx)
			pcancel()
			if err != nil && ctx.Err() == nil {
				s.shutdown(ports.ClosePolicy, "idle timeout")
				return
			}
		}
	}
}

// read dispatches the client's messages until the socket ends or the
// session closes it. Nothing is processed once the close has begun (a
// violation, a drain, a timeout): §8.7 forbids processing round bytes
// past a violation, and the reader leaves the socket to the close
// handshake, which discards data messages while it waits for the peer.
func (s *Session) read(ctx context.Context, c ports.RealtimeConn) {
	for !s.isClosing() {
		m, err := c.Read(ctx)
		if ce, ok := errors.AsType[*ports.RealtimeCloseError](err); ok {
			s.violation(ce.Code, ce.Reason)
			return
		}
		if err != nil || s.isClosing() {
			return
		}
		if m.Binary {
			s.binary(ctx, m.Data)
		} else {
			s.control(ctx, m.Data)
		}
	}
}

// control handles a client control message (§8.1, §8.2). A malformed
// known message closes the socket; unknown ones are ignored.
func (s *Session) control(ctx context.Context, text []byte) {
	m, err := realtime.ParseClientMessage(text)
	if err != nil {
		s.violation(ports.ClosePolicy, string(syncerr.CodeOf(err))+": "+err.Error())
		return
	}
	switch m := m.(type) {
	case *realtime.Ack:
		s.ack(ctx, m.Cursor)
	case *realtime.PresencePublish:
		s.presencePublish(ctx, m)
	}
}

// ack applies a client ack (§8.2): the session's cursor and observed seq
// move up to it (lifting the suppression once it reaches the highest seq
// observed) and the stored cursor advances, monotonically, for the same
// actor and the live epoch only, never creating a record.
func (s *Session) ack(ctx context.Context, cursor int64) {
	if cursor < 0 {
		s.violation(ports.ClosePolicy, fmt.Sprintf("%s: ack cursor %d is negative", syncerr.InvalidRequest, cursor))
		return
	}
	s.mu.Lock()
	// A cursor past every seq this node has seen for the partition is
	// clamped to the highest one: it cannot have been delivered, and
	// stored as is it would mark commits not yet written as acknowledged.
	cursor = min(cursor, max(s.lastSeq, s.target.Load()))
	s.cursor = max(s.cursor, cursor)
	s.lastSeq = max(s.lastSeq, cursor)
	if s.cursor >= s.lastSeq {
		s.wakePending = false
	}
	epoch, regs := s.epoch, s.regs
	s.mu.Unlock()
	s.seen(regs)
	if _, err := s.hub.o.Store.AdvanceClientCursor(ctx, ports.CursorAdvance{
		Partition: s.id.Partition, ClientID: s.clientID, ActorID: s.id.ActorID,
		LogEpoch: epoch, Cursor: cursor, NowMs: s.hub.nowMs(),
	}); err != nil && ctx.Err() == nil {
		s.hub.log.Warn("realtime ack not stored", zap.String("partition", s.id.Partition),
			zap.String("client_id", s.clientID), zap.Error(err))
	}
}

// binary handles a client binary message: a 0x01 round chunk (§8.7).
func (s *Session) binary(ctx context.Context, b []byte) {
	if len(b) == 0 {
		return
	}
	if b[0] != realtime.TagRound {
		s.violation(ports.ClosePolicy, "unexpected channel tag")
		return
	}
	s.mu.Lock()
	active := s.roundActive
	s.mu.Unlock()
	if active {
		s.violation(ports.ClosePolicy, "sync round begun while a response stream is in flight")
		return
	}
	chunk := b[1:]
	if !s.scanner.Pending() && len(chunk) > 0 {
		s.armRound(ctx)
	}
	// The bytes that arrived are what is held on the budget, not the
	// buffer's capacity: without a declared length the buffer doubles, and
	// counting its slack would refuse a round the budget can hold (one as
	// large as the budget must still arrive, as a POST /sync body can).
	msg, excess, err := s.scanner.Push(chunk)
	if errors.Is(err, realtime.ErrRequestTooLarge) {
		s.violation(ports.CloseTooBig, fmt.Sprintf("%s: %v", syncerr.InvalidRequest, err))
		return
	}
	if err == nil {
		if rerr := s.share.Reserve(int64(len(chunk))); rerr != nil {
			s.violation(ports.CloseTryAgainLater, string(syncerr.RateLimited)+": server busy; retry later")
			return
		}
	}
	if err != nil {
		s.violation(ports.ClosePolicy, err.Error())
		return
	}
	if msg == nil {
		return
	}
	s.disarmRound()
	if excess > 0 {
		s.violation(ports.ClosePolicy, "request bytes past END (pipelining)")
		return
	}
	s.mu.Lock()
	s.roundActive = true
	s.mu.Unlock()
	s.rounds.Go(func() { s.round(ctx, msg) })
}

// armRound starts the deadline of a round whose first bytes arrived: a
// client that begins a request and never ends it, pinging to keep the
// socket alive, is closed once the body read timeout passes.
func (s *Session) armRound(ctx context.Context) {
	d := s.hub.o.RoundTimeout
	if d <= 0 {
		return
	}
	dctx, cancel := context.WithCancel(ctx)
	s.roundDeadline = cancel
	go func() {
		if s.hub.o.Sleep(dctx, d) == nil {
			s.violation(ports.ClosePolicy, fmt.Sprintf("%s: socket round not completed within %v", syncerr.InvalidRequest, d))
		}
	}()
}

// disarmRound stops the deadline of the round being read.
func (s *Session) disarmRound() {
	if s.roundDeadline != nil {
		s.roundDeadline()
		s.roundDeadline = nil
	}
}

// round runs one socket round through the POST /sync handler and streams
// its response back in 0x01 chunks (§8.7).
func (s *Session) round(ctx context.Context, msg []byte) {
	if m := s.hub.o.Metrics; m != nil {
		m.Round()
	}
	s.mu.Lock()
	errWire, epoch := s.wire, s.epoch
	s.mu.Unlock()
	// A refusal is written in the request's own generation whenever the
	// codec can write it, admitted or not: a wire-2 client refused for its
	// version must be able to read why.
	if v := binary.LittleEndian.Uint16(msg[4:]); v >= round.LowestMinWireVersion && v <= round.MaxWireVersion {
		errWire = v
	}
	var err error
	ctx, span := s.startRound(ctx)
	defer span.end(&err)
	pull := false
	if m, derr := ssp2.Decode(msg); derr == nil {
		for _, f := range m.Frames {
			switch f := f.(type) {
			case *ssp2.ReqHeader:
				if f.ClientID != s.clientID {
					err = syncerr.Newf(syncerr.InvalidClientID, "a socket round's client id must be the connection's")
				}
				// A refusal echoes the epoch the client sent: it tells the
				// client nothing about the log, so it must not read as an
				// epoch change (a fresh client gets the partition's).
				if f.LogEpoch.Value != "" {
					epoch = f.LogEpoch.Value
				}
			case *ssp2.PullHeader:
				pull = true
			}
		}
	}
	var resp *round.Response
	if err == nil {
		// A socket round is a request like POST /sync: it takes one of
		// the node's processing slots, or is refused as busy.
		err = s.share.Acquire()
	}
	if err == nil {
		resp, err = s.hub.o.Rounds.Handle(round.WithTransport(ctx, event.TransportRealtime), s.id, msg)
	}
	// The request is done with: its buffer and slot go back to the node.
	s.share.Release()
	failed := err != nil
	if err != nil {
		// Refused before the first byte (the buffered read-verify included):
		// RESP_HEADER, ERROR, END, like the HTTP binding's JSON answer.
		if ctx.Err() != nil {
			return
		}
		s.hub.log.Debug("socket round refused", zap.String("partition", s.id.Partition), zap.String("client_id", s.clientID),
			zap.String("code", string(syncerr.CodeOf(err))), zap.Error(err))
		resp = round.ErrorResponse(err, errWire, epoch)
	}
	defer resp.Release()
	var own int64 = -1
	for _, f := range resp.Frames {
		switch f := f.(type) {
		case *ssp2.Error:
			failed = true
		case *ssp2.PushResult:
			if f.Status == ssp2.PushApplied {
				own = max(own, f.CommitSeq)
			}
		}
	}
	cw := &chunker{ctx: ctx, out: s.out, size: DefaultChunkBytes}
	if err := resp.Encode(cw); err != nil {
		s.violation(ports.CloseInternal, "sync round failed mid-stream")
		return
	}
	var regs []registration
	reload := pull && !failed
	if reload {
		var lerr error
		if _, regs, lerr = s.hub.load(ctx, s.id, s.clientID); lerr != nil {
			reload = false // the previous registrations stay
			s.hub.log.Warn("realtime registrations not reloaded after a round", zap.String("client_id", s.clientID), zap.Error(lerr))
		}
	}
	s.mu.Lock()
	// The round ends with its last chunk: the client may begin the next
	// one as soon as END arrives.
	s.roundActive = false
	if reload {
		s.regs = regs
	}
	if !failed {
		s.wire = resp.WireVersion
	}
	if own > s.lastSeq {
		// The round's own commits were observed mid-round: no delta may
		// carry them, so the session catches up by pull (§8.7).
		s.lastSeq = own
		s.wakePending = true
		s.sendWake(realtime.WakeCatchupRequired)
	}
	s.out.put(cw.final())
	s.mu.Unlock()
	if reload {
		s.hub.presenceRederive(s)
	}
	signal(s.wakeCh)
}

// sendWake queues a wake-up; callers hold mu. A catch-up of a session
// whose cursor fell below the pruning horizon is a reset (§8.3): its pull
// answers with a reset section, not the commits it missed.
func (s *Session) sendWake(reason realtime.WakeReason) {
	if reason == realtime.WakeCatchupRequired && s.cursor >= 0 && s.cursor < s.horizon {
		reason = realtime.WakeResetRequired
	}
	text, err := realtime.Encode(&realtime.Wake{Cursor: s.lastSeq, Reason: reason, Timestamp: s.hub.nowMs()})
	if err != nil {
		return
	}
	s.queueControl(text, reason)
	if m := s.hub.o.Metrics; m != nil {
		m.Wake(reason)
	}
}

// chunker cuts a round's response stream into 0x01 messages, waiting for
// room in the send queue (backpressure), and keeps the last chunk for the
// round's end.
type chunker struct {
	ctx  context.Context
	out  *outbox
	size int
	buf  []byte
}

func (c *chunker) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if c.buf == nil {
			c.buf = append(make([]byte, 0, c.size+1), realtime.TagRound)
		}
		k := min(len(p), c.size+1-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p = p[k:]
		if len(c.buf) == c.size+1 && len(p) > 0 {
			if err := c.out.wait(c.ctx, len(c.buf)); err != nil {
				return 0, err
			}
			c.out.put(c.buf)
			c.buf = nil
		}
	}
	return n, nil
}

// final is the last chunk, ending exactly at END.
func (c *chunker) final() []byte { return c.buf }

// work is the session's delta worker.
func (s *Session) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wakeCh:
		}
		if s.resetq.Swap(false) {
			s.resynk.Store(false)
			s.rebase(ctx)
			continue
		}
		if s.resynk.Swap(false) {
			b, epoch, err := s.bounds(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.catchUp()
				continue
			}
			s.mu.Lock()
			rotated := epoch != s.epoch
			s.horizon = max(s.horizon, b.HorizonSeq)
			s.mu.Unlock()
			if rotated { // a restore while notices were lost
				s.rebase(ctx)
				continue
			}
			s.notify(b.MaxSeq)
		}
		s.pass(ctx)
	}
}

// bounds reads the partition's log bounds and epoch.
func (s *Session) bounds(ctx context.Context) (ports.LogBounds, string, error) {
	epoch, _, err := s.hub.o.Store.LogEpoch(ctx, s.id.Partition)
	if err != nil {
		return ports.LogBounds{}, "", err
	}
	b, err := s.hub.o.Store.LogBounds(ctx, s.id.Partition)
	return b, epoch, err
}

// rebase moves the session onto the partition's log as it is now (a
// restore rotated the epoch, or the host forced a resync): the epoch and
// bounds re-read, the registrations re-loaded (failing closed: none), the
// cursor the stored one (none after a rotation, which deletes the client
// records), deltas suppressed until the client pulls and acks, and a
// reset-required wake-up sent (§8.3).
func (s *Session) rebase(ctx context.Context) {
	b, epoch, err := s.bounds(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.hub.log.Warn("realtime reset could not read the log; the session keeps no registration",
				zap.String("partition", s.id.Partition), zap.String("client_id", s.clientID), zap.Error(err))
		}
		s.mu.Lock()
		s.regs = nil
		s.wakePending = true
		s.sendWake(realtime.WakeResetRequired)
		s.mu.Unlock()
		s.hub.presenceRederive(s)
		return
	}
	rec, regs, err := s.hub.load(ctx, s.id, s.clientID)
	if err != nil {
		regs = nil
	}
	// The old epoch's seqs mean nothing now: the notice target restarts at
	// the new log's end (a later notice raises it again).
	s.target.Store(b.MaxSeq)
	s.mu.Lock()
	s.epoch, s.horizon = epoch, b.HorizonSeq
	s.lastSeq, s.cursor = b.MaxSeq, -1
	if rec != nil && rec.ActorID == s.id.ActorID {
		s.cursor = rec.Cursor
	} else {
		regs = nil
	}
	s.regs = regs
	s.wakePending = true
	s.sendWake(realtime.WakeResetRequired)
	s.mu.Unlock()
	s.hub.presenceRederive(s)
}

// catchUp falls back to a wake-up when the log cannot be read.
func (s *Session) catchUp() {
	s.mu.Lock()
	s.wakePending = true
	s.sendWake(realtime.WakeCatchupRequired)
	s.mu.Unlock()
}

// pass delivers what the notices announced past the observed seq (§8.2):
// one cursor-contiguous delta of every matching commit, or a wake-up
// while suppressed, mid-round, oversize or when the queue is full.
func (s *Session) pass(ctx context.Context) {
	target := s.target.Load()
	s.mu.Lock()
	after, regs := s.lastSeq, s.regs
	s.mu.Unlock()
	if target <= after {
		return
	}
	var secs []section
	changes := 0
	s.mu.Lock()
	epoch := s.epoch
	s.mu.Unlock()
	var shared []commit.Commit
	var fromFeed bool
	var err error
	if len(regs) > 0 {
		shared, fromFeed, err = s.hub.feeds.window(ctx, s.hub.o.Store, s.id.Partition, epoch, after, target)
	}
	for _, r := range regs {
		var cs []commit.Commit
		switch {
		case err != nil:
		case fromFeed:
			cs = matching(shared, r)
		default: // behind the feed: this session's own read
			cs, err = s.hub.o.Store.ReadCommitWindow(ctx, s.id.Partition, ports.CommitWindow{
				Table: r.table, ScopeFilter: r.effective, AfterSeq: after, ThroughSeq: target, LimitChanges: deltaChangeCap,
			})
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.hub.log.Warn("realtime commit read failed; the session catches up by pull", zap.Error(err))
			s.mu.Lock()
			s.lastSeq = max(s.lastSeq, target)
			s.mu.Unlock()
			s.catchUp()
			return
		}
		if len(cs) > 0 {
			secs = append(secs, section{reg: r, commits: cs})
			for i := range cs {
				changes += len(cs[i].Changes)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastSeq >= target {
		return // an ack or the session's own round got there first
	}
	s.lastSeq = target
	if len(secs) == 0 {
		return
	}
	dropped := func(reason realtime.WakeReason) {
		s.wakePending = true
		s.sendWake(reason)
		if m := s.hub.o.Metrics; m != nil {
			m.Dropped()
		}
	}
	if s.roundActive || s.wakePending {
		dropped(realtime.WakeCatchupRequired)
		return
	}
	if changes >= deltaChangeCap {
		dropped(realtime.WakeDeltaTooLarge)
		return
	}
	b, err := encodeDelta(s.wire, s.epoch, secs, target)
	if err != nil {
		s.hub.log.Error("encode delta", zap.Error(err))
		dropped(realtime.WakeCatchupRequired)
		return
	}
	if len(b) > s.hub.o.MaxDeltaBytes {
		dropped(realtime.WakeDeltaTooLarge)
		return
	}
	tagged := append(make([]byte, 0, len(b)+1), realtime.TagDelta)
	tagged = append(tagged, b...)
	if !s.out.offer(tagged) {
		dropped(realtime.WakeCatchupRequired)
		return
	}
	s.cursor = target
	if m := s.hub.o.Metrics; m != nil {
		m.Delta(len(b))
	}
}

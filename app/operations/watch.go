package operations

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/remoteop"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Watch defaults.
const (
	DefaultMaxWatches = 64
	// watchRangeChanges bounds the commits read to learn which tables a
	// notice touched; past it every watch of the partition reruns.
	watchRangeChanges = 10_000
)

// WatchOptions configure a WatchHub.
type WatchOptions struct {
	// Log reads the commits a notice announces, to learn their tables.
	Log ports.LogReader
	// MaxWatches bounds the active watches of one socket (default 64).
	MaxWatches int
	// WriteTimeout bounds one message write (default 10 s): a socket that
	// does not take it is closed.
	WriteTimeout time.Duration
	Logger       *zap.Logger
}

// WatchHub serves the live query watches of <mount>/operations/realtime
// (REMOTE.md §6) on one node. It hears commits as a ports.FanoutHandler
// (every node's, this one's included): a commit touching a watched
// query's table reruns the query and sends a full replacement snapshot;
// commits arriving while it runs set one dirty flag, so at most one rerun
// is pending per watch.
type WatchHub struct {
	s *Service
	o WatchOptions

	mu       sync.Mutex
	parts    map[string]*watchPartition
	draining bool
}

type watchPartition struct {
	sessions map[*watchSession]struct{}
	seq      int64 // the highest commit seq whose watches were woken
}

// NewWatchHub builds the hub over the service's registry and reads.
func (s *Service) NewWatchHub(o WatchOptions) (*WatchHub, error) {
	if o.Log == nil {
		return nil, errors.New("operations: WatchOptions.Log is required")
	}
	if o.MaxWatches <= 0 {
		o.MaxWatches = DefaultMaxWatches
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &WatchHub{s: s, o: o, parts: map[string]*watchPartition{}}, nil
}

var _ ports.FanoutHandler = (*WatchHub)(nil)

type watchSession struct {
	h      *WatchHub
	id     ports.Identity
	conn   ports.RealtimeConn
	ctx    context.Context
	cancel context.CancelFunc

	writeMu sync.Mutex
	mu      sync.Mutex
	watches map[string]*watch
}

type watch struct {
	id, clientID string
	reg          *registered
	params       remoteop.Value
	running      bool
	dirty        bool
	removed      bool
}

// Serve runs one accepted socket for an authenticated caller until it
// ends; a malformed client message closes it with 1008.
func (h *WatchHub) Serve(ctx context.Context, id ports.Identity, c ports.RealtimeConn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ss := &watchSession{h: h, id: id, conn: c, ctx: ctx, cancel: cancel, watches: map[string]*watch{}}
	if err := h.join(ctx, ss); err != nil {
		h.o.Logger.Warn("watch session refused", zap.String("partition", id.Partition), zap.Error(err))
		_ = c.Close(ports.CloseTryAgainLater, "try again later")
		return
	}
	defer h.leave(ss)
	for {
		m, err := c.Read(ctx)
		if err != nil {
			code, reason := ports.CloseNormal, ""
			if ce, ok := errors.AsType[*ports.RealtimeCloseError](err); ok {
				code, reason = ce.Code, ce.Reason
			}
			_ = c.Close(code, reason)
			return
		}
		msg, err := remoteop.DecodeWatchMessage(m.Data)
		if err != nil {
			_ = c.Close(ports.ClosePolicy, "malformed operations message")
			return
		}
		ss.receive(msg)
	}
}

// join registers the session; a partition's first session reads where
// its log stands, so older commits wake nothing.
func (h *WatchHub) join(ctx context.Context, ss *watchSession) error {
	h.mu.Lock()
	p := h.parts[ss.id.Partition]
	h.mu.Unlock()
	var seq int64
	if p == nil {
		b, err := h.o.Log.LogBounds(ctx, ss.id.Partition)
		if err != nil {
			return err
		}
		seq = b.MaxSeq
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.draining {
		return errors.New("the server is draining")
	}
	if p = h.parts[ss.id.Partition]; p == nil {
		p = &watchPartition{sessions: map[*watchSession]struct{}{}, seq: seq}
		h.parts[ss.id.Partition] = p
	}
	p.sessions[ss] = struct{}{}
	return nil
}

func (h *WatchHub) leave(ss *watchSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.parts[ss.id.Partition]; p != nil {
		delete(p.sessions, ss)
		if len(p.sessions) == 0 {
			delete(h.parts, ss.id.Partition)
		}
	}
	ss.mu.Lock()
	for _, w := range ss.watches {
		w.removed = true
	}
	ss.mu.Unlock()
}

func (ss *watchSession) receive(m remoteop.WatchMessage) {
	if m.Kind == remoteop.KindUnwatch {
		ss.mu.Lock()
		if w := ss.watches[m.WatchID]; w != nil {
			w.removed = true // suppresses a result still running for it
			delete(ss.watches, m.WatchID)
		}
		ss.mu.Unlock()
		return
	}
	if err := ss.admit(m); err != nil {
		ss.send(remoteop.EncodeWatchError(m.WatchID, err))
		return
	}
	ss.mu.Lock()
	w := ss.watches[m.WatchID]
	ss.mu.Unlock()
	ss.trigger(w)
}

// admit runs the HTTP request's checks for a watch and registers it.
func (ss *watchSession) admit(m remoteop.WatchMessage) error {
	lim := ss.h.s.o.Limits.WithDefaults()
	if len(m.WatchID) > lim.MaxIDBytes || len(m.OperationID) > lim.MaxIDBytes {
		return syncerr.Newf(syncerr.OperationInvalid, "watch or operation id longer than %d bytes", lim.MaxIDBytes)
	}
	if len(m.ClientID) > lim.MaxIDBytes {
		return syncerr.Newf(syncerr.InvalidClientID, "client id of %d bytes is longer than %d", len(m.ClientID), lim.MaxIDBytes)
	}
	ss.mu.Lock()
	_, active := ss.watches[m.WatchID]
	full := len(ss.watches) >= ss.h.o.MaxWatches
	ss.mu.Unlock()
	if active {
		return syncerr.Newf(syncerr.OperationInvalid, "watch id %q is already active", m.WatchID).WithMessage("watchId is already active")
	}
	if full {
		return syncerr.Newf(syncerr.OperationInvalid, "more than %d watches on one socket", ss.h.o.MaxWatches)
	}
	bound, ok, err := ss.h.s.o.Store.ClientBinding(ss.ctx, ss.id.Partition, m.ClientID)
	if err != nil {
		return err
	}
	if err := push.CheckClientID(m.ClientID, ss.id.ActorID, bound, ok); err != nil {
		return err
	}
	reg := ss.h.s.o.Registry.query(m.OperationID)
	if reg == nil {
		return syncerr.Newf(syncerr.OperationUnknown, "no query operation %q", m.OperationID)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, active := ss.watches[m.WatchID]; active {
		return syncerr.Newf(syncerr.OperationInvalid, "watch id %q is already active", m.WatchID).WithMessage("watchId is already active")
	}
	ss.watches[m.WatchID] = &watch{id: m.WatchID, clientID: m.ClientID, reg: reg, params: m.Params}
	return nil
}

// trigger runs w now, or marks it dirty when a run is in progress.
func (ss *watchSession) trigger(w *watch) {
	ss.mu.Lock()
	if w == nil || w.removed {
		ss.mu.Unlock()
		return
	}
	if w.running {
		w.dirty = true
		ss.mu.Unlock()
		return
	}
	w.running = true
	ss.mu.Unlock()
	go ss.run(w)
}

func (ss *watchSession) run(w *watch) {
	for {
		res, err := ss.h.s.runQuery(ss.ctx, ss.id, w.clientID, w.params, w.reg)
		var msg []byte
		if err == nil {
			msg, err = remoteop.EncodeSnapshot(w.id, res)
		}
		if err != nil {
			msg = remoteop.EncodeWatchError(w.id, err)
		}
		ss.mu.Lock()
		if w.removed || ss.ctx.Err() != nil {
			w.running = false
			ss.mu.Unlock()
			return
		}
		ss.mu.Unlock()
		ss.send(msg)
		ss.mu.Lock()
		if w.dirty && !w.removed {
			w.dirty = false
			ss.mu.Unlock()
			continue
		}
		w.running = false
		ss.mu.Unlock()
		return
	}
}

// send writes one message; a socket that cannot take it is ended.
func (ss *watchSession) send(msg []byte) {
	ss.writeMu.Lock()
	defer ss.writeMu.Unlock()
	ctx, cancel := context.WithTimeout(ss.ctx, ss.h.o.WriteTimeout)
	defer cancel()
	if err := ss.conn.Write(ctx, ports.RealtimeMessage{Binary: true, Data: msg}); err != nil {
		ss.cancel()
	}
}

// wake reruns the partition's watches of the given tables (every watch
// when all is set).
func (h *WatchHub) wake(partition string, tables map[string]bool, all bool) {
	h.mu.Lock()
	p := h.parts[partition]
	var sessions []*watchSession
	if p != nil {
		for ss := range p.sessions {
			sessions = append(sessions, ss)
		}
	}
	h.mu.Unlock()
	for _, ss := range sessions {
		ss.mu.Lock()
		var due []*watch
		for _, w := range ss.watches {
			if all || tables[w.reg.plan.Table().Name] {
				due = append(due, w)
			}
		}
		ss.mu.Unlock()
		for _, w := range due {
			ss.trigger(w)
		}
	}
}

// Commit implements ports.FanoutHandler: the commits after the last one
// seen are read (their tables only matter) off the listener's goroutine.
func (h *WatchHub) Commit(n ports.CommitNotice) {
	h.mu.Lock()
	p := h.parts[n.Partition]
	if p == nil || n.CommitSeq <= p.seq {
		h.mu.Unlock()
		return
	}
	after := p.seq
	p.seq = n.CommitSeq
	h.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		span, err := h.o.Log.ReadCommitRange(ctx, n.Partition, ports.CommitRange{AfterSeq: after, ThroughSeq: n.CommitSeq, LimitChanges: watchRangeChanges})
		if err != nil || span.ThroughSeq < n.CommitSeq {
			h.wake(n.Partition, nil, true) // not knowing the tables, rerun them all
			return
		}
		tables := map[string]bool{}
		for _, c := range span.Commits {
			for _, ch := range c.Changes {
				tables[ch.Table] = true
			}
		}
		h.wake(n.Partition, tables, false)
	}()
}

// Event implements ports.FanoutHandler; watches need no events.
func (h *WatchHub) Event(ports.FanoutEvent) {}

// Resync implements ports.FanoutHandler: notices may be lost, so every
// watch reruns.
func (h *WatchHub) Resync() {
	h.mu.Lock()
	parts := make([]string, 0, len(h.parts))
	for name := range h.parts {
		parts = append(parts, name)
	}
	h.mu.Unlock()
	for _, name := range parts {
		h.wake(name, nil, true)
	}
}

// Drain closes every socket with 1001 (the server is going away) and
// refuses new ones; http.Server.Shutdown does not close hijacked
// connections.
func (h *WatchHub) Drain() {
	h.mu.Lock()
	h.draining = true
	var sessions []*watchSession
	for _, p := range h.parts {
		for ss := range p.sessions {
			sessions = append(sessions, ss)
		}
	}
	h.mu.Unlock()
	for _, ss := range sessions {
		_ = ss.conn.Close(ports.CloseGoingAway, "server shutting down")
		ss.cancel()
	}
}

package operations

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/sockets"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Watch defaults.
const (
	DefaultMaxWatches         = 64
	DefaultMaxWatchesPerActor = 256
	DefaultWatchEvaluations   = 2
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
	// MaxWatchesPerActor bounds the active watches of one actor on this
	// node, across its sockets (default 256).
	MaxWatchesPerActor int
	// Evaluations bounds the watch queries running at once on this node
	// (default 2); the reruns a commit wakes wait for a turn.
	Evaluations int
	// Sockets are the node's socket slots, shared with the realtime
	// channel's sockets; nil: the watch sockets are not bounded.
	Sockets *sockets.Slots
	// WriteTimeout bounds one message write (default 10 s): a socket that
	// does not take it is closed.
	WriteTimeout time.Duration
	Logger       *zap.Logger
}

// WatchHub serves the live query watches of <mount>/operations/realtime
// (REMOTE.md §6) on one node. It hears commits as a ports.FanoutHandler
// (every node's, this one's included): a commit touching a watched
// query's table reruns the query and sends a full replacement snapshot.
//
// What one commit costs is bounded: the identical watches of one caller
// (same partition, actor, credential scopes, client id, query and
// params) share one evaluation, so a commit runs at most one query per
// distinct watch, and there are at most MaxWatchesPerActor of those per
// actor and MaxWatches per socket, whose sockets the node's socket slots
// bound. At most Evaluations queries run at once; commits arriving while
// a query waits or runs leave one rerun pending, not one per commit.
type WatchHub struct {
	s     *Service
	o     WatchOptions
	evals chan struct{} // one token per watch query running

	mu       sync.Mutex
	parts    map[string]*watchPartition
	perActor map[string]int // active watches by actorKey
	draining bool
}

type watchPartition struct {
	sessions map[*watchSession]struct{}
	queries  map[string]*liveQuery // by watchKey
	seq      int64                 // the highest commit seq whose watches were woken
	want     int64                 // the highest commit seq noticed
	reading  bool                  // a reader of the commits past seq is running
}

// NewWatchHub builds the hub over the service's registry and reads.
func (s *Service) NewWatchHub(o WatchOptions) (*WatchHub, error) {
	if o.Log == nil {
		return nil, errors.New("operations: WatchOptions.Log is required")
	}
	if o.MaxWatches < 0 || o.MaxWatchesPerActor < 0 || o.Evaluations < 0 {
		return nil, errors.New("operations: negative watch limit")
	}
	if o.MaxWatches == 0 {
		o.MaxWatches = DefaultMaxWatches
	}
	if o.MaxWatchesPerActor == 0 {
		o.MaxWatchesPerActor = DefaultMaxWatchesPerActor
	}
	if o.Evaluations == 0 {
		o.Evaluations = DefaultWatchEvaluations
	}
	if o.Sockets == nil {
		o.Sockets, _ = sockets.New(0, 0)
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &WatchHub{s: s, o: o, evals: make(chan struct{}, o.Evaluations),
		parts: map[string]*watchPartition{}, perActor: map[string]int{}}, nil
}

var _ ports.FanoutHandler = (*WatchHub)(nil)

type watchSession struct {
	h      *WatchHub
	id     ports.Identity
	conn   ports.RealtimeConn
	ctx    context.Context
	cancel context.CancelFunc

	writeMu sync.Mutex
	watches map[string]*watch // under h.mu
}

// liveQuery is the one evaluation the identical watches of a caller
// share (see watchKey). Its fields past members are under h.mu.
type liveQuery struct {
	key      string
	table    string
	id       ports.Identity
	clientID string
	params   opdomain.Value
	reg      *registered
	// ctx carries the first watch's socket values (the identity the
	// resolver reads) and ends when the last watch goes.
	ctx    context.Context
	cancel context.CancelFunc

	members map[*watch]struct{}
	running bool // an evaluator goroutine owns the query
	stale   bool // a commit may have changed the rows since the last run began
}

type watch struct {
	id      string
	ss      *watchSession
	q       *liveQuery
	first   bool // waits for its first snapshot
	removed bool
}

// WatchAdmission is a watch socket admitted before its upgrade: its
// socket slot is taken. Run serves the accepted socket until it ends;
// Abort gives the slot back when the upgrade fails.
type WatchAdmission struct {
	h    *WatchHub
	id   ports.Identity
	once sync.Once
}

// Admit takes a socket slot for an authenticated upgrade, or refuses it
// with the catalog error the upgrade is answered with:
// sync.websocket_connection_limit past the node's socket caps (counted
// with the realtime channel's sockets), sync.schema_not_ready while the
// server drains.
func (h *WatchHub) Admit(id ports.Identity) (*WatchAdmission, error) {
	h.mu.Lock()
	draining := h.draining
	h.mu.Unlock()
	if draining {
		return nil, syncerr.Newf(syncerr.SchemaNotReady, "the server is draining")
	}
	if err := h.o.Sockets.Take(id); err != nil {
		return nil, err
	}
	return &WatchAdmission{h: h, id: id}, nil
}

// Abort gives the admission's slot back; Run does when the socket ends.
func (a *WatchAdmission) Abort() { a.once.Do(func() { a.h.o.Sockets.Release(a.id) }) }

// Run serves the accepted socket until it ends.
func (a *WatchAdmission) Run(ctx context.Context, c ports.RealtimeConn) {
	defer a.Abort()
	a.h.serve(ctx, a.id, c)
}

// Serve admits and runs one accepted socket for an authenticated caller
// (a refused admission closes it with 1013); a malformed client message
// closes it with 1008.
func (h *WatchHub) Serve(ctx context.Context, id ports.Identity, c ports.RealtimeConn) {
	a, err := h.Admit(id)
	if err != nil {
		h.o.Logger.Warn("watch session refused", zap.String("partition", id.Partition), zap.Error(err))
		_ = c.Close(ports.CloseTryAgainLater, "try again later")
		return
	}
	a.Run(ctx, c)
}

func (h *WatchHub) serve(ctx context.Context, id ports.Identity, c ports.RealtimeConn) {
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
		msg, err := opdomain.DecodeWatchMessage(m.Data)
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
		p = &watchPartition{sessions: map[*watchSession]struct{}{}, queries: map[string]*liveQuery{}, seq: seq, want: seq}
		h.parts[ss.id.Partition] = p
	}
	p.sessions[ss] = struct{}{}
	return nil
}

func (h *WatchHub) leave(ss *watchSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range ss.watches {
		h.remove(w)
	}
	if p := h.parts[ss.id.Partition]; p != nil {
		delete(p.sessions, ss)
		if len(p.sessions) == 0 {
			delete(h.parts, ss.id.Partition)
		}
	}
}

// remove ends w (h.mu held): no snapshot for it follows, and a query no
// watch shares any more stops.
func (h *WatchHub) remove(w *watch) {
	w.removed = true
	delete(w.ss.watches, w.id)
	key := actorKey(w.ss.id)
	if h.perActor[key]--; h.perActor[key] <= 0 {
		delete(h.perActor, key)
	}
	q := w.q
	delete(q.members, w)
	if len(q.members) > 0 {
		return
	}
	q.cancel()
	if p := h.parts[w.ss.id.Partition]; p != nil && p.queries[q.key] == q {
		delete(p.queries, q.key)
	}
}

func (ss *watchSession) receive(m opdomain.WatchMessage) {
	if m.Kind == opdomain.KindUnwatch {
		ss.h.mu.Lock()
		if w := ss.watches[m.WatchID]; w != nil {
			ss.h.remove(w) // suppresses a result still running for it
		}
		ss.h.mu.Unlock()
		return
	}
	if err := ss.admit(m); err != nil {
		// Written from the reading goroutine: a client that does not read
		// its refusals stops being read.
		ss.write(nil, opdomain.EncodeWatchError(m.WatchID, err))
	}
}

// admit runs the HTTP request's checks for a watch, registers it and
// starts its first evaluation.
func (ss *watchSession) admit(m opdomain.WatchMessage) error {
	h := ss.h
	lim := h.s.o.Limits.WithDefaults()
	if len(m.WatchID) > lim.MaxIDBytes || len(m.OperationID) > lim.MaxIDBytes {
		return syncerr.Newf(syncerr.OperationInvalid, "watch or operation id longer than %d bytes", lim.MaxIDBytes)
	}
	if len(m.ClientID) > lim.MaxIDBytes {
		return syncerr.Newf(syncerr.InvalidClientID, "client id of %d bytes is longer than %d", len(m.ClientID), lim.MaxIDBytes)
	}
	h.mu.Lock()
	err := h.roomFor(ss, m.WatchID)
	h.mu.Unlock()
	if err != nil {
		return err
	}
	bound, ok, err := h.s.o.Store.ClientBinding(ss.ctx, ss.id.Partition, m.ClientID)
	if err != nil {
		return err
	}
	if err := push.CheckClientID(m.ClientID, ss.id.ActorID, bound, ok); err != nil {
		return err
	}
	reg := h.s.o.Registry.query(m.OperationID)
	if reg == nil {
		return syncerr.Newf(syncerr.OperationUnknown, "no query operation %q", m.OperationID)
	}
	key, err := watchKey(ss.id, m.ClientID, m.OperationID, m.Params)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Checked again: another socket of the actor may have taken the room.
	if err := h.roomFor(ss, m.WatchID); err != nil {
		return err
	}
	p := h.parts[ss.id.Partition]
	if p == nil { // only between the session's leave and its end
		return syncerr.Newf(syncerr.SchemaNotReady, "the watch socket is closing")
	}
	q := p.queries[key]
	if q == nil {
		q = &liveQuery{key: key, table: reg.plan.Table().Name, id: ss.id, clientID: m.ClientID, params: m.Params, reg: reg,
			members: map[*watch]struct{}{}}
		q.ctx, q.cancel = context.WithCancel(context.WithoutCancel(ss.ctx))
		p.queries[key] = q
	}
	w := &watch{id: m.WatchID, ss: ss, q: q, first: true}
	q.members[w] = struct{}{}
	ss.watches[m.WatchID] = w
	h.perActor[actorKey(ss.id)]++
	h.start(q)
	return nil
}

// roomFor refuses a watch id already active on the socket and a watch
// past the socket's or the actor's bound (h.mu held).
func (h *WatchHub) roomFor(ss *watchSession, watchID string) error {
	if _, active := ss.watches[watchID]; active {
		return syncerr.Newf(syncerr.OperationInvalid, "watch id %q is already active", watchID).WithMessage("watchId is already active")
	}
	if len(ss.watches) >= h.o.MaxWatches {
		return syncerr.Newf(syncerr.OperationInvalid, "more than %d watches on one socket", h.o.MaxWatches)
	}
	if h.perActor[actorKey(ss.id)] >= h.o.MaxWatchesPerActor {
		return syncerr.Newf(syncerr.OperationInvalid, "more than %d watches of one actor on this node", h.o.MaxWatchesPerActor)
	}
	return nil
}

// watchKey names what a watch's evaluation depends on: the caller (its
// partition, actor and the scopes its credential carries, which a
// resolver may read), the client id, the query and its params. Watches
// with one key get the same rows and share one evaluation.
func watchKey(id ports.Identity, clientID, operationID string, params opdomain.Value) (string, error) {
	grant, err := json.Marshal(id.Scopes) // map keys sorted: one text per grant
	if err != nil {
		return "", syncerr.Wrap(syncerr.OperationInvalid, err)
	}
	p, err := params.Encode()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, part := range []string{id.Partition, id.ActorID, string(grant), clientID, operationID, string(p)} {
		b.WriteString(strconv.Itoa(len(part)))
		b.WriteByte(':')
		b.WriteString(part)
	}
	return b.String(), nil
}

// start makes sure an evaluator runs q (h.mu held).
func (h *WatchHub) start(q *liveQuery) {
	if q.running {
		return
	}
	q.running = true
	go h.evaluate(q)
}

// evaluate runs q while a member waits for a snapshot: a new watch's
// first, or every watch's after a commit. It waits for an evaluation
// token before each run; the commits noticed until the run begins are
// all in it.
func (h *WatchHub) evaluate(q *liveQuery) {
	for {
		select {
		case h.evals <- struct{}{}:
		case <-q.ctx.Done():
			h.mu.Lock()
			q.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Lock()
		all := q.stale
		q.stale = false
		var to []*watch
		for w := range q.members {
			if all || w.first {
				w.first = false
				to = append(to, w)
			}
		}
		h.mu.Unlock()
		var (
			res opdomain.QueryResult
			err error
		)
		if len(to) > 0 {
			res, err = h.s.runQuery(q.ctx, q.id, q.clientID, q.params, q.reg)
		}
		<-h.evals
		// Sent after the token is back: a slow socket holds up only the
		// watches that share its query, all of one caller.
		for _, w := range to {
			var msg []byte
			if err == nil {
				msg, err = opdomain.EncodeSnapshot(w.id, res)
			}
			if err != nil {
				msg = opdomain.EncodeWatchError(w.id, err)
			}
			w.ss.write(w, msg)
		}
		h.mu.Lock()
		again := q.ctx.Err() == nil && (q.stale || q.waiting())
		if !again {
			q.running = false
		}
		h.mu.Unlock()
		if !again {
			return
		}
	}
}

// waiting reports whether a member still waits for its first snapshot
// (h.mu held).
func (q *liveQuery) waiting() bool {
	for w := range q.members {
		if w.first {
			return true
		}
	}
	return false
}

// write sends one message, for w (suppressed once w is removed) or for
// the socket (w nil); a socket that cannot take it is ended.
func (ss *watchSession) write(w *watch, msg []byte) {
	ss.writeMu.Lock()
	defer ss.writeMu.Unlock()
	if w != nil {
		ss.h.mu.Lock()
		gone := w.removed
		ss.h.mu.Unlock()
		if gone {
			return
		}
	}
	if ss.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ss.ctx, ss.h.o.WriteTimeout)
	defer cancel()
	if err := ss.conn.Write(ctx, ports.RealtimeMessage{Binary: true, Data: msg}); err != nil {
		ss.cancel()
	}
}

// wake marks the partition's queries of the given tables stale (every
// query when all is set) and starts their evaluators.
func (h *WatchHub) wake(partition string, tables map[string]bool, all bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.parts[partition]
	if p == nil {
		return
	}
	for _, q := range p.queries {
		if all || tables[q.table] {
			q.stale = true
			h.start(q)
		}
	}
}

// Commit implements ports.FanoutHandler: the commits after the last one
// seen are read (their tables only matter) off the listener's goroutine,
// by one reader per partition; notices arriving meanwhile extend its
// next read.
func (h *WatchHub) Commit(n ports.CommitNotice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.parts[n.Partition]
	if p == nil || n.CommitSeq <= p.want {
		return
	}
	p.want = n.CommitSeq
	if !p.reading {
		p.reading = true
		go h.readCommits(n.Partition, p)
	}
}

// readCommits wakes the watches of the tables the commits past p.seq
// touched, until it has caught up with the notices.
func (h *WatchHub) readCommits(partition string, p *watchPartition) {
	for {
		h.mu.Lock()
		after, through := p.seq, p.want
		if after >= through || h.parts[partition] != p {
			p.reading = false
			h.mu.Unlock()
			return
		}
		p.seq = through
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		span, err := h.o.Log.ReadCommitRange(ctx, partition, ports.CommitRange{AfterSeq: after, ThroughSeq: through, LimitChanges: watchRangeChanges})
		cancel()
		if err != nil || span.ThroughSeq < through {
			h.wake(partition, nil, true) // not knowing the tables, rerun them all
			continue
		}
		tables := map[string]bool{}
		for _, c := range span.Commits {
			for _, ch := range c.Changes {
				tables[ch.Table] = true
			}
		}
		h.wake(partition, tables, false)
	}
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

// actorKey names an actor within its partition.
func actorKey(id ports.Identity) string { return id.Partition + "\x00" + id.ActorID }

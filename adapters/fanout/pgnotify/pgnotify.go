// Package pgnotify is the ports.Fanout of several syncd nodes on one
// PostgreSQL database, over LISTEN/NOTIFY.
//
//   - Channel: one per deployment, derived from the schema the DSN's
//     search_path selects (current_schema()), so deployments in different
//     schemas of one database never hear each other.
//   - Publishing delivers to this node's listeners at once (in process)
//     and queues the notification for an outbox goroutine that sends
//     whatever accumulated in one round trip (pg_notify on a small pool);
//     queued commit notices coalesce per partition. The node's own
//     notifications coming back through the database are skipped (they
//     carry the node's id), so nothing is delivered twice.
//   - Listening uses one dedicated connection (LISTEN, WaitForNotification).
//     When it drops, it reconnects with capped exponential backoff, and
//     every time it is listening again every handler gets Resync:
//     notifications sent while it was not listening are lost.
//   - Events larger than one notification are cut into chunks sent in one
//     transaction, so MaxEventBytes (64 KiB by default) is not bound by
//     NOTIFY's 8000 bytes.
package pgnotify

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/adapters/fanout/local"
	"github.com/syncd-dev/syncd/ports"
)

// Defaults of Options.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
	DefaultOutboxSize = 4096
)

// ErrBacklog refuses a publish while the outbox is full (the database is
// unreachable or slower than the publishers); this node's listeners got it.
var ErrBacklog = errors.New("fanout: notification outbox full")

// Options configure New.
type Options struct {
	// DSN is a pgx connection string; its search_path picks the channel.
	DSN string
	// Channel overrides the derived channel name.
	Channel string
	// Log is required.
	Log *zap.Logger
	// Sleep waits between reconnect attempts (nil: the wall clock); tests
	// inject their own.
	Sleep func(ctx context.Context, d time.Duration) error
	// MinBackoff and MaxBackoff bound the reconnect delay, which doubles
	// per failed attempt (0: the defaults).
	MinBackoff, MaxBackoff time.Duration
	// QueueSize bounds each listener's queue (see package local).
	QueueSize int
	// MaxEventBytes caps event payloads (0: local.DefaultMaxEventBytes).
	MaxEventBytes int
	// OutboxSize bounds the notifications waiting to be sent (0: default).
	OutboxSize int
}

// Fanout is the LISTEN/NOTIFY fanout. Start runs it; Close stops it.
type Fanout struct {
	o      Options
	node   string
	hub    *local.Fanout
	listen *pgx.ConnConfig
	pool   *pgxpool.Pool
	sleep  func(ctx context.Context, d time.Duration) error

	chMu    sync.Mutex
	channel string

	msgSeq atomic.Uint64

	outMu   sync.Mutex
	out     []outMsg
	pending map[string]int // partition -> index in out
	outWake chan struct{}

	startOnce sync.Once
	closeOnce sync.Once
	closed    atomic.Bool
	cancel    context.CancelFunc
	ctx       context.Context
	wg        sync.WaitGroup

	listening  atomic.Bool
	pid        atomic.Uint32
	reconnects atomic.Int64
	asm        assembler // listener goroutine only
}

type outMsg struct {
	commit   bool
	notice   ports.CommitNotice
	payloads []string
}

var _ ports.Fanout = (*Fanout)(nil)

// New prepares a fanout over o.DSN without connecting.
func New(o Options) (*Fanout, error) {
	if o.Log == nil {
		return nil, errors.New("pgnotify: Options.Log is required")
	}
	lc, err := pgx.ParseConfig(o.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: dsn: %w", err)
	}
	pc, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: dsn: %w", err)
	}
	pc.MaxConns, pc.MinConns = 2, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: pool: %w", err)
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.OutboxSize <= 0 {
		o.OutboxSize = DefaultOutboxSize
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = local.DefaultMaxEventBytes
	}
	if o.Sleep == nil {
		o.Sleep = clock.Wall{}.Sleep
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgnotify: node id: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Fanout{
		o: o, node: base64.RawURLEncoding.EncodeToString(id[:]),
		hub:    local.New(local.Options{QueueSize: o.QueueSize, MaxEventBytes: o.MaxEventBytes, Log: o.Log}),
		listen: lc, pool: pool, sleep: o.Sleep, channel: o.Channel,
		pending: map[string]int{}, outWake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel,
	}, nil
}

// ChannelFor is the channel of the deployment whose tables live in schema.
func ChannelFor(schema string) string {
	sum := sha256.Sum256([]byte(schema))
	return "syncd_fanout_" + hex.EncodeToString(sum[:8])
}

// Start runs the listener and the outbox in the background; it never
// blocks (connecting is the listener's first step, retried with backoff).
func (f *Fanout) Start() {
	f.startOnce.Do(func() {
		f.wg.Go(f.listenLoop)
		f.wg.Go(f.sendLoop)
	})
}

// Close stops listening and delivering, sends what the outbox still holds
// (bounded by ctx) and releases the connections.
func (f *Fanout) Close(ctx context.Context) error {
	var err error
	f.closeOnce.Do(func() {
		f.closed.Store(true)
		f.cancel()
		f.wg.Wait()
		err = f.flush(ctx)
		f.pool.Close()
		_ = f.hub.Close()
	})
	return err
}

// Listening reports whether the listener connection is up and listening.
func (f *Fanout) Listening() bool { return f.listening.Load() }

// ListenerPID is the backend pid of the listener connection (0 when down).
func (f *Fanout) ListenerPID() uint32 { return f.pid.Load() }

// Reconnects counts listener connections established after the first.
func (f *Fanout) Reconnects() int64 { return f.reconnects.Load() }

// Overflows counts listener queue overflows (see package local).
func (f *Fanout) Overflows() int64 { return f.hub.Overflows() }

// MaxEventBytes is the payload cap of Options.MaxEventBytes.
func (f *Fanout) MaxEventBytes() int { return f.o.MaxEventBytes }

// Listen registers h; see ports.Fanout.
func (f *Fanout) Listen(ctx context.Context, h ports.FanoutHandler) (func(), error) {
	return f.hub.Listen(ctx, h)
}

// PublishCommit delivers n to this node's listeners and queues it for the
// others. An error (closed, outbox full) means the other nodes may miss it.
func (f *Fanout) PublishCommit(ctx context.Context, n ports.CommitNotice) error {
	if f.closed.Load() {
		return ports.ErrFanoutClosed
	}
	// Encoded here only to refuse a notice that cannot travel; the outbox
	// encodes the (possibly coalesced) notice again.
	if _, err := encodeCommit(f.node, n); err != nil {
		return err
	}
	if err := f.hub.PublishCommit(ctx, n); err != nil {
		return err
	}
	f.outMu.Lock()
	defer f.outMu.Unlock()
	if i, ok := f.pending[n.Partition]; ok {
		f.out[i].notice.CommitSeq = max(f.out[i].notice.CommitSeq, n.CommitSeq)
		return nil
	}
	if len(f.out) >= f.o.OutboxSize {
		return ErrBacklog
	}
	f.pending[n.Partition] = len(f.out)
	f.out = append(f.out, outMsg{commit: true, notice: n})
	f.wakeSender()
	return nil
}

// PublishEvent delivers e to this node's listeners and queues it for the
// others; a payload over MaxEventBytes is refused.
func (f *Fanout) PublishEvent(ctx context.Context, e ports.FanoutEvent) error {
	if f.closed.Load() {
		return ports.ErrFanoutClosed
	}
	if err := local.CheckEvent(e, f.o.MaxEventBytes); err != nil {
		return err
	}
	if err := f.hub.PublishEvent(ctx, e); err != nil {
		return err
	}
	payloads := encodeEvent(f.node, f.msgSeq.Add(1), e)
	f.outMu.Lock()
	defer f.outMu.Unlock()
	if len(f.out) >= f.o.OutboxSize {
		return ErrBacklog
	}
	f.out = append(f.out, outMsg{payloads: payloads})
	f.wakeSender()
	return nil
}

func (f *Fanout) wakeSender() {
	select {
	case f.outWake <- struct{}{}:
	default:
	}
}

// takeOutbox empties the outbox.
func (f *Fanout) takeOutbox() []outMsg {
	f.outMu.Lock()
	defer f.outMu.Unlock()
	batch := f.out
	f.out = nil
	clear(f.pending)
	return batch
}

// requeue puts the commit notices of a failed batch back (merging with
// newer ones); its events are dropped, as events are not durable.
func (f *Fanout) requeue(batch []outMsg) (dropped int) {
	f.outMu.Lock()
	defer f.outMu.Unlock()
	for _, m := range batch {
		if !m.commit {
			dropped++
			continue
		}
		if i, ok := f.pending[m.notice.Partition]; ok {
			f.out[i].notice.CommitSeq = max(f.out[i].notice.CommitSeq, m.notice.CommitSeq)
			continue
		}
		if len(f.out) >= f.o.OutboxSize {
			dropped++
			continue
		}
		f.pending[m.notice.Partition] = len(f.out)
		f.out = append(f.out, m)
	}
	return dropped
}

func (f *Fanout) sendLoop() {
	for attempt := 0; ; {
		select {
		case <-f.ctx.Done():
			return
		case <-f.outWake:
		}
		batch := f.takeOutbox()
		if len(batch) == 0 {
			continue
		}
		err := f.send(f.ctx, batch)
		if err == nil {
			attempt = 0
			continue
		}
		dropped := f.requeue(batch)
		if f.ctx.Err() != nil {
			return
		}
		wait := f.backoff(attempt)
		attempt++
		f.o.Log.Warn("fanout: sending notifications failed; retrying",
			zap.Error(err), zap.Int("events_dropped", dropped), zap.Duration("retry_in", wait))
		if f.sleep(f.ctx, wait) != nil {
			return
		}
		f.wakeSender()
	}
}

// flush sends what the outbox holds once (at Close).
func (f *Fanout) flush(ctx context.Context) error {
	batch := f.takeOutbox()
	if len(batch) == 0 {
		return nil
	}
	if err := f.send(ctx, batch); err != nil {
		return fmt.Errorf("fanout: final notifications: %w", err)
	}
	return nil
}

// send runs one batch: one round trip, one implicit transaction, so the
// chunks of an event reach every listener together and in order.
func (f *Fanout) send(ctx context.Context, batch []outMsg) error {
	ch, err := f.channelName(ctx, f.pool)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for _, m := range batch {
		if m.commit {
			p, err := encodeCommit(f.node, m.notice)
			if err != nil {
				continue // refused at publish; unreachable
			}
			b.Queue("select pg_notify($1, $2)", ch, p)
			continue
		}
		for _, p := range m.payloads {
			b.Queue("select pg_notify($1, $2)", ch, p)
		}
	}
	return f.pool.SendBatch(ctx, b).Close()
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// channelName resolves the channel once, from the schema the tables live
// in (or the search_path when none of its schemas exists yet).
func (f *Fanout) channelName(ctx context.Context, q querier) (string, error) {
	f.chMu.Lock()
	defer f.chMu.Unlock()
	if f.channel != "" {
		return f.channel, nil
	}
	var schema string
	if err := q.QueryRow(ctx, "select coalesce(current_schema(), current_setting('search_path'))").Scan(&schema); err != nil {
		return "", fmt.Errorf("fanout: resolve channel: %w", err)
	}
	f.channel = ChannelFor(schema)
	return f.channel, nil
}

func (f *Fanout) backoff(attempt int) time.Duration {
	d := f.o.MinBackoff
	for i := 0; i < attempt && d < f.o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, f.o.MaxBackoff)
}

func (f *Fanout) listenLoop() {
	connected := false
	for attempt := 0; ; {
		err := f.session(f.ctx, func() {
			if connected {
				f.reconnects.Add(1)
			}
			connected = true
			attempt = 0
		})
		f.listening.Store(false)
		f.pid.Store(0)
		if f.ctx.Err() != nil {
			return
		}
		wait := f.backoff(attempt)
		attempt++
		f.o.Log.Warn("fanout: listener connection lost; reconnecting",
			zap.Error(err), zap.Duration("retry_in", wait))
		if f.sleep(f.ctx, wait) != nil {
			return
		}
	}
}

// session connects, listens and delivers until the connection fails or
// ctx ends; up is called once it listens.
func (f *Fanout) session(ctx context.Context, up func()) error {
	conn, err := pgx.ConnectConfig(ctx, f.listen)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	ch, err := f.channelName(ctx, conn)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "listen "+pgx.Identifier{ch}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	up()
	f.asm.reset()
	f.pid.Store(conn.PgConn().PID())
	// Resync before Listening turns true: a handler that registers once
	// the fanout listens has missed nothing and is not woken for nothing.
	f.hub.Resync()
	f.listening.Store(true)
	f.o.Log.Info("fanout: listening", zap.String("channel", ch), zap.Uint32("backend_pid", conn.PgConn().PID()))
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		f.receive(n.Payload)
	}
}

func (f *Fanout) receive(payload string) {
	m, err := decode(payload)
	if err != nil {
		f.o.Log.Warn("fanout: ignoring a malformed notification", zap.Int("bytes", len(payload)))
		return
	}
	if m.node == f.node {
		return // delivered locally when published
	}
	if m.commit {
		_ = f.hub.PublishCommit(context.Background(), m.notice)
		return
	}
	e, ok, err := f.asm.add(m)
	if err != nil {
		f.o.Log.Warn("fanout: dropping an incomplete event", zap.String("node", m.node))
		return
	}
	if ok {
		if err := f.hub.PublishEvent(context.Background(), e); err != nil {
			f.o.Log.Warn("fanout: dropping an event this node does not carry", zap.Error(err))
		}
	}
}

// Package nats is the ports.Fanout of several syncd nodes over core NATS
// publish/subscribe, beside LISTEN/NOTIFY (package pgnotify) for
// deployments that already run NATS or outgrow NOTIFY's serialization.
//
//   - NATS carries wake-ups only: commit notices and realtime events,
//     never commits. A NATS server acknowledges before anything is durable
//     and core NATS delivers at most once, so the commit log stays in
//     storage and a notice only says "read from storage".
//   - Subjects: <prefix>.<deployment>.c.<partition> for notices and
//     <prefix>.<deployment>.e.<topic>.<key> for events (names made safe
//     by Token); <deployment> hashes what the nodes share (their database
//     and schema), so deployments on one NATS never hear each other. Each
//     node subscribes to <prefix>.<deployment>.>.
//   - Publishing delivers to this node's listeners at once (in process)
//     and queues the message for an outbox goroutine that publishes what
//     accumulated and confirms it with one round trip to the server (a
//     flush); queued commit notices coalesce per partition, and a failed
//     send keeps them for a retry (events are dropped).
//   - One connection, reconnected by this package with capped
//     exponential backoff on the app clock (nats.go's own reconnect is
//     off). Every time it is subscribed again every handler gets Resync,
//     after a round trip proves the subscription is in place: messages
//     published while it was down are gone. The first connection counts
//     too.
//   - Bounded buffers: the subscription holds at most PendingMessages and
//     PendingBytes before delivery (beyond, nats.go drops messages, and
//     the next delivery notices the drop and resyncs every handler); the
//     listeners' queues are package local's; a NATS server that cuts a
//     slow consumer ends the connection, which resyncs on reconnect.
package nats

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/adapters/fanout/local"
	"github.com/syncd-dev/syncd/ports"
)

// Defaults of Options.
const (
	DefaultSubjectPrefix   = "syncd"
	DefaultMinBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff      = 10 * time.Second
	DefaultOutboxSize      = 4096
	DefaultPendingMessages = 65536
	DefaultPendingBytes    = 64 << 20
	DefaultPingInterval    = 10 * time.Second
	DefaultSendTimeout     = 10 * time.Second
	// dialTimeout bounds one TCP dial to a server.
	dialTimeout = 5 * time.Second
)

// ErrBacklog refuses a publish while the outbox is full (NATS is
// unreachable or slower than the publishers); this node's listeners got it.
var ErrBacklog = errors.New("fanout: NATS outbox full")

// Options configure New.
type Options struct {
	// URL is a NATS server URL, or several comma-separated (nats://,
	// tls://); user:password@ or token@ in a URL authenticates.
	URL string
	// CredentialsFile is a NATS credentials file (user JWT and NKey seed).
	CredentialsFile string
	// TLSCAFile holds the CAs that verify the server's certificate;
	// TLSCertFile and TLSKeyFile a client certificate. The files are read
	// at every connection, so a rotation needs no restart.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// SubjectPrefix heads every subject (default "syncd"); a literal
	// subject of one or more tokens.
	SubjectPrefix string
	// Deployment names what the nodes of one deployment share (database
	// and schema); it is hashed into the subjects. Called once, before the
	// first connection (retried with backoff while it fails). Nil: the
	// prefix alone separates deployments.
	Deployment func(ctx context.Context) (string, error)
	// Log is required.
	Log *zap.Logger
	// Sleep waits between reconnect attempts (nil: the wall clock).
	Sleep func(ctx context.Context, d time.Duration) error
	// MinBackoff and MaxBackoff bound the reconnect delay, which doubles
	// per failed attempt (0: the defaults).
	MinBackoff, MaxBackoff time.Duration
	// QueueSize bounds each listener's queue (see package local).
	QueueSize int
	// MaxEventBytes caps event payloads (0: local.DefaultMaxEventBytes).
	MaxEventBytes int
	// OutboxSize bounds the messages waiting to be published (0: default).
	OutboxSize int
	// PendingMessages and PendingBytes bound what the subscription holds
	// before it is delivered (0: the defaults); past them messages are
	// dropped and every handler resyncs.
	PendingMessages, PendingBytes int
	// PingInterval is how often the client pings the server; two
	// unanswered pings end the connection (0: DefaultPingInterval).
	PingInterval time.Duration
	// SendTimeout bounds the round trip that confirms a send and the one
	// that confirms a subscription (0: DefaultSendTimeout).
	SendTimeout time.Duration
}

// Fanout is the NATS fanout. Start runs it; Close stops it.
type Fanout struct {
	o    Options
	node []byte
	hub  *local.Fanout

	rootMu sync.Mutex
	root   string

	conn atomic.Pointer[natsgo.Conn]
	sub  atomic.Pointer[natsgo.Subscription]

	outMu   sync.Mutex
	out     []outMsg
	pending map[string]int // partition -> index in out
	outWake chan struct{}

	startOnce  sync.Once
	closeOnce  sync.Once
	closed     atomic.Bool
	ctx        context.Context // listener
	cancel     context.CancelFunc
	sendCtx    context.Context
	sendCancel context.CancelFunc
	wg         sync.WaitGroup // listener
	sendWG     sync.WaitGroup

	listening  atomic.Bool
	reconnects atomic.Int64
	dropped    atomic.Int64 // resyncs after the subscription dropped messages

	// onMessage, when set (tests), runs before each delivery.
	onMessage func()
}

type outMsg struct {
	commit bool
	notice ports.CommitNotice
	event  ports.FanoutEvent
}

var _ ports.Fanout = (*Fanout)(nil)

// New prepares a fanout without connecting.
func New(o Options) (*Fanout, error) {
	if o.Log == nil {
		return nil, errors.New("nats fanout: Options.Log is required")
	}
	if o.URL == "" {
		return nil, errors.New("nats fanout: Options.URL is required")
	}
	if o.SubjectPrefix == "" {
		o.SubjectPrefix = DefaultSubjectPrefix
	}
	if !ValidSubject(o.SubjectPrefix) {
		return nil, fmt.Errorf("nats fanout: subject prefix %q: want dot-separated tokens without spaces, '*' or '>'", o.SubjectPrefix)
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return nil, errors.New("nats fanout: a client certificate needs both its certificate and its key file")
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
	if o.PendingMessages <= 0 {
		o.PendingMessages = DefaultPendingMessages
	}
	if o.PendingBytes <= 0 {
		o.PendingBytes = DefaultPendingBytes
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	if o.Sleep == nil {
		o.Sleep = clock.Wall{}.Sleep
	}
	node := make([]byte, nodeBytes)
	if _, err := rand.Read(node); err != nil {
		return nil, fmt.Errorf("nats fanout: node id: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sendCtx, sendCancel := context.WithCancel(context.Background())
	return &Fanout{
		o: o, node: node,
		hub:     local.New(local.Options{QueueSize: o.QueueSize, MaxEventBytes: o.MaxEventBytes, Log: o.Log}),
		pending: map[string]int{}, outWake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, sendCtx: sendCtx, sendCancel: sendCancel,
	}, nil
}

// Start runs the connection and the outbox in the background; it never
// blocks (connecting is the listener's first step, retried with backoff).
func (f *Fanout) Start() {
	f.startOnce.Do(func() {
		f.wg.Go(f.listenLoop)
		f.sendWG.Go(f.sendLoop)
	})
}

// Close stops the outbox, publishes what it still holds (bounded by ctx)
// while the connection lasts, then closes the connection and stops
// delivering.
func (f *Fanout) Close(ctx context.Context) error {
	var err error
	f.closeOnce.Do(func() {
		f.closed.Store(true)
		f.sendCancel()
		f.sendWG.Wait()
		err = f.flush(ctx)
		f.cancel()
		f.wg.Wait()
		_ = f.hub.Close()
	})
	return err
}

// Listening reports whether the connection is up and subscribed.
func (f *Fanout) Listening() bool { return f.listening.Load() }

// Reconnects counts connections established after the first.
func (f *Fanout) Reconnects() int64 { return f.reconnects.Load() }

// Overflows counts the overflows answered with a Resync: the listeners'
// queues (see package local) and the subscription's pending limits.
func (f *Fanout) Overflows() int64 { return f.hub.Overflows() + f.dropped.Load() }

// MaxEventBytes is the payload cap of Options.MaxEventBytes.
func (f *Fanout) MaxEventBytes() int { return f.o.MaxEventBytes }

// Subject is the root of this fanout's subjects, empty until resolved.
func (f *Fanout) Subject() string {
	f.rootMu.Lock()
	defer f.rootMu.Unlock()
	return f.root
}

// Listen registers h; see ports.Fanout.
func (f *Fanout) Listen(ctx context.Context, h ports.FanoutHandler) (func(), error) {
	return f.hub.Listen(ctx, h)
}

// PublishCommit delivers n to this node's listeners and queues it for the
// others. An error (closed, outbox full, a partition over
// MaxPartitionBytes) means the other nodes may miss it.
func (f *Fanout) PublishCommit(ctx context.Context, n ports.CommitNotice) error {
	if f.closed.Load() {
		return ports.ErrFanoutClosed
	}
	if len(n.Partition) > MaxPartitionBytes {
		return fmt.Errorf("fanout: partition of %d bytes, at most %d travel", len(n.Partition), MaxPartitionBytes)
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
	e.Payload = append([]byte(nil), e.Payload...)
	f.outMu.Lock()
	defer f.outMu.Unlock()
	if len(f.out) >= f.o.OutboxSize {
		return ErrBacklog
	}
	f.out = append(f.out, outMsg{event: e})
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
		case <-f.sendCtx.Done():
			return
		case <-f.outWake:
		}
		nc := f.conn.Load()
		if nc == nil {
			continue // the outbox waits; the next connection wakes the sender
		}
		batch := f.takeOutbox()
		if len(batch) == 0 {
			continue
		}
		err := f.send(f.sendCtx, nc, batch)
		if err == nil {
			attempt = 0
			continue
		}
		dropped := f.requeue(batch)
		if f.sendCtx.Err() != nil {
			return
		}
		wait := f.backoff(attempt)
		attempt++
		f.o.Log.Warn("fanout: publishing to NATS failed; retrying",
			zap.Error(err), zap.Int("events_dropped", dropped), zap.Duration("retry_in", wait))
		if f.o.Sleep(f.sendCtx, wait) != nil {
			return
		}
		f.wakeSender()
	}
}

// flush publishes what the outbox holds once (at Close).
func (f *Fanout) flush(ctx context.Context) error {
	batch := f.takeOutbox()
	if len(batch) == 0 {
		return nil
	}
	nc := f.conn.Load()
	if nc == nil {
		return fmt.Errorf("fanout: %d final NATS messages not sent: not connected", len(batch))
	}
	if err := f.send(ctx, nc, batch); err != nil {
		return fmt.Errorf("fanout: final NATS messages: %w", err)
	}
	return nil
}

// send publishes a batch and waits for the server to have processed it
// (one PING/PONG round trip): a send that fails before that is retried,
// so a connection lost with notices in its buffers loses none of them.
func (f *Fanout) send(ctx context.Context, nc *natsgo.Conn, batch []outMsg) error {
	root := f.Subject()
	for _, m := range batch {
		var subj string
		var body []byte
		if m.commit {
			subj, body = commitSubject(root, m.notice.Partition), encodeCommit(f.node, m.notice)
		} else {
			subj, body = eventSubject(root, m.event), encodeEvent(f.node, m.event)
		}
		if err := nc.Publish(subj, body); err != nil {
			if errors.Is(err, natsgo.ErrMaxPayload) {
				// The server's max_payload is below what this node
				// carries: retrying cannot help.
				f.o.Log.Warn("fanout: message over the NATS server's max_payload dropped",
					zap.Int("bytes", len(body)), zap.Int64("max_payload", nc.MaxPayload()))
				continue
			}
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, f.o.SendTimeout)
	defer cancel()
	return nc.FlushWithContext(ctx)
}

func (f *Fanout) backoff(attempt int) time.Duration {
	d := f.o.MinBackoff
	for i := 0; i < attempt && d < f.o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, f.o.MaxBackoff)
}

// resolveRoot names the subjects once: prefix and deployment token.
func (f *Fanout) resolveRoot(ctx context.Context) (string, error) {
	f.rootMu.Lock()
	defer f.rootMu.Unlock()
	if f.root != "" {
		return f.root, nil
	}
	root := f.o.SubjectPrefix
	if f.o.Deployment != nil {
		d, err := f.o.Deployment(ctx)
		if err != nil {
			return "", fmt.Errorf("resolve the deployment: %w", err)
		}
		root += "." + DeploymentToken(d)
	}
	f.root = root
	return root, nil
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
		if f.ctx.Err() != nil {
			return
		}
		wait := f.backoff(attempt)
		attempt++
		f.o.Log.Warn("fanout: NATS connection lost; reconnecting",
			zap.Error(err), zap.Duration("retry_in", wait))
		if f.o.Sleep(f.ctx, wait) != nil {
			return
		}
	}
}

// session connects, subscribes and delivers until the connection ends or
// ctx does; up is called once it is subscribed.
func (f *Fanout) session(ctx context.Context, up func()) error {
	root, err := f.resolveRoot(ctx)
	if err != nil {
		return err
	}
	lost := make(chan error, 1)
	nc, err := natsgo.Connect(f.o.URL, f.connectOptions(ctx, lost)...)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		f.conn.Store(nil)
		nc.Close()
	}()
	var seen int // drops already answered; the subscription's goroutine only
	sub, err := nc.Subscribe(root+".>", func(m *natsgo.Msg) {
		if f.onMessage != nil {
			f.onMessage()
		}
		if n, err := m.Sub.Dropped(); err == nil && n > seen {
			// Messages were dropped before this one (a drop needs a full
			// queue, so one always follows): their commits are in storage.
			f.o.Log.Warn("fanout: NATS subscription dropped messages; sessions resync", zap.Int("dropped", n-seen))
			seen = n
			f.dropped.Add(1)
			f.hub.Resync()
		}
		f.receive(m.Data)
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := sub.SetPendingLimits(f.o.PendingMessages, f.o.PendingBytes); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	f.sub.Store(sub)
	fctx, cancel := context.WithTimeout(ctx, f.o.SendTimeout)
	err = nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if need := int64(f.o.MaxEventBytes + local.MaxTopicBytes + local.MaxKeyBytes + frameOverhead); nc.MaxPayload() < need {
		f.o.Log.Warn("fanout: the NATS server's max_payload is below the largest event; larger ones are dropped",
			zap.Int64("max_payload", nc.MaxPayload()), zap.Int64("largest_event", need))
	}
	up()
	f.conn.Store(nc)
	// The subscription is in place (the flush came back): whatever was
	// published before it is read from storage by this resync, whatever
	// after arrives. Resync before Listening turns true: a handler that
	// registers once the fanout listens has missed nothing.
	f.hub.Resync()
	f.listening.Store(true)
	f.wakeSender()
	f.o.Log.Info("fanout: subscribed on NATS", zap.String("subject", root+".>"), zap.String("server", nc.ConnectedUrlRedacted()))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-lost:
		return err
	}
}

func (f *Fanout) connectOptions(ctx context.Context, lost chan<- error) []natsgo.Option {
	signal := func(err error) {
		select {
		case lost <- err:
		default:
		}
	}
	opts := []natsgo.Option{
		natsgo.Name("syncd"),
		// This package reconnects, so that every connection resyncs the
		// same way and waits on the app clock.
		natsgo.NoReconnect(),
		natsgo.NoEcho(),
		natsgo.PingInterval(f.o.PingInterval),
		natsgo.MaxPingsOutstanding(2),
		natsgo.SetCustomDialer(ctxDialer{ctx: ctx}),
		// The handlers only wake this connection's session, which turns
		// Listening off: they run on nats.go's callback goroutine and may
		// come after the next connection is up.
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			signal(err)
		}),
		natsgo.ClosedHandler(func(nc *natsgo.Conn) {
			err := nc.LastError()
			if err == nil {
				err = natsgo.ErrConnectionClosed
			}
			signal(err)
		}),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, _ *natsgo.Subscription, err error) {
			// A slow consumer is answered on the next delivery (above);
			// anything else is worth a line.
			if !errors.Is(err, natsgo.ErrSlowConsumer) {
				f.o.Log.Warn("fanout: NATS error", zap.Error(err))
			}
		}),
	}
	if f.o.CredentialsFile != "" {
		opts = append(opts, natsgo.UserCredentials(f.o.CredentialsFile))
	}
	if f.o.TLSCAFile != "" {
		opts = append(opts, natsgo.RootCAs(f.o.TLSCAFile))
	}
	if f.o.TLSCertFile != "" {
		opts = append(opts, natsgo.ClientCert(f.o.TLSCertFile, f.o.TLSKeyFile))
	}
	return opts
}

// ctxDialer dials under the listener's context, so Close does not wait
// for a dial to time out.
type ctxDialer struct{ ctx context.Context }

func (d ctxDialer) Dial(network, address string) (net.Conn, error) {
	return (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext(d.ctx, network, address)
}

func (f *Fanout) receive(body []byte) {
	m, err := decode(body)
	if err != nil {
		f.o.Log.Warn("fanout: ignoring a malformed NATS message", zap.Int("bytes", len(body)))
		return
	}
	if m.node == string(f.node) {
		return // delivered locally when published
	}
	if m.commit {
		_ = f.hub.PublishCommit(context.Background(), m.notice)
		return
	}
	if err := f.hub.PublishEvent(context.Background(), m.event); err != nil {
		f.o.Log.Warn("fanout: dropping an event this node does not carry", zap.Error(err))
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// The realtime scenarios need clients on their sockets whatever
// --transport says: the storm drops and redials them, the propagation
// receivers wait on them.

// realtimeClient makes a client with a realtime socket of its own, on
// the server at baseURL, with virtual client i's identity.
func (e *env) realtimeClient(clientID string, i int, baseURL string) (*wsClient, error) {
	ht, ok := e.t.(*httpTransport)
	if !ok {
		return nil, errors.New("the realtime scenarios need the HTTP transport's clients")
	}
	c, err := ht.newClient(clientID, baseURL, e.identity(i))
	if err != nil {
		return nil, err
	}
	return &wsClient{Client: c, ro: client.RealtimeOptions{HTTP: ht.ws}}, nil
}

// connect dials the socket, timed as one "connect" (upgrade to hello).
func (e *env) connect(ctx context.Context, w *wsClient) error {
	return e.timed(ctx, "connect", func() (int, int, error) {
		ctx, cancel := context.WithTimeout(ctx, e.o.timeout)
		defer cancel()
		return 0, 0, w.ensure(ctx)
	})
}

func reconnectStorm() *scenario {
	return &scenario{
		name: "reconnect-storm",
		about: "every client holds a realtime socket (its rounds go over it) on its own project and its neighbour's; per step " +
			"it pushes, drops its socket, redials (\"connect\": upgrade to hello) and pulls; at the end every replica of a " +
			"project must equal its owner's",
		kinds: []string{"connect", "push", "pull", "bootstrap"},
		init: func(ctx context.Context, e *env, v *vu) error {
			w, ok := v.c.(*wsClient)
			if !ok {
				var err error
				if w, err = e.realtimeClient(v.c.ClientID(), v.idx, e.baseURL(v.idx)); err != nil {
					return err
				}
				v.c = w
			}
			if err := e.connect(ctx, w); err != nil {
				return err
			}
			if err := initOwn(ctx, e, v); err != nil {
				return err
			}
			_, err := e.bootstrap(ctx, v, "peer", e.project((v.idx+1)%e.o.vus))
			return err
		},
		step: func(ctx context.Context, e *env, v *vu) error {
			w := v.c.(*wsClient)
			if err := e.pushRound(ctx, v, e.project(v.idx), e.o.rowsPerClient); err != nil {
				return err
			}
			if rt := w.Realtime(); rt != nil {
				rt.Close()
			}
			if err := e.connect(ctx, w); err != nil {
				return err
			}
			_, _, _, err := e.pullRound(ctx, v, false)
			return err
		},
		finish: stormConverged,
	}
}

// stormConverged pulls every replica until idle, then checks that each
// client's copy of its neighbour's project equals the neighbour's own.
func stormConverged(ctx context.Context, e *env, vus []*vu) error {
	for _, v := range vus {
		w, ok := v.c.(*wsClient)
		if !ok {
			return protoErr("loader.not_converged", "client %d never became ready", v.idx)
		}
		if err := w.ensure(ctx); err != nil {
			return fmt.Errorf("client %d reconnect: %w", v.idx, err)
		}
		if _, err := w.PullUntilIdle(ctx, 1000); err != nil {
			return fmt.Errorf("client %d final pull: %w", v.idx, err)
		}
	}
	table := e.fx.table.Name
	compared := 0
	for _, v := range vus {
		owner := vus[(v.idx+1)%len(vus)]
		prefix := e.project(owner.idx) + "-r"
		mine, theirs := projectRows(v.c.Rows(table), prefix), projectRows(owner.c.Rows(table), prefix)
		if len(mine) != len(theirs) {
			return protoErr("loader.not_converged", "client %d holds %d rows of %s, its owner %d", v.idx, len(mine), prefix, len(theirs))
		}
		for id, ver := range theirs {
			if mine[id] != ver {
				return protoErr("loader.not_converged", "client %d holds %s at version %d, its owner at %d", v.idx, id, mine[id], ver)
			}
		}
		compared += len(theirs)
	}
	e.note("convergedRows", compared)
	connects := 0
	for _, v := range vus {
		connects += v.c.(*wsClient).connects
	}
	e.note("socketConnects", connects)
	return nil
}

func projectRows(rows map[string]client.Row, prefix string) map[string]int64 {
	out := map[string]int64{}
	for id, r := range rows {
		if len(id) > len(prefix) && id[:len(prefix)] == prefix {
			out[id] = r.Version
		}
	}
	return out
}

// arrival is a commit seq a receiver got, when, and how.
type arrival struct {
	seq   int64
	at    time.Time
	round bool // by a wake-up's round rather than a delta
}

// receiver is a propagation pair's listening client: its own goroutine
// serves the socket (the client is used by that goroutine only).
type receiver struct {
	w       *wsClient
	arrived chan arrival
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
}

func (r *receiver) serve(ctx context.Context) {
	defer close(r.done)
	defer r.w.Close()
	rt := r.w.Realtime()
	if rt == nil {
		r.err = client.ErrRealtimeClosed
		return
	}
	for ctx.Err() == nil {
		ev, err := rt.Next(ctx)
		at := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				r.err = err
			}
			return
		}
		res, round := ev.Delta, false
		if res == nil {
			res, round = ev.Round, true
		}
		if seq := maxCommitSeq(res); seq > 0 {
			select {
			case r.arrived <- arrival{seq: seq, at: at, round: round}:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (r *receiver) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

func maxCommitSeq(res *client.Result) int64 {
	var seq int64
	if res == nil || res.Message == nil {
		return 0
	}
	for _, f := range res.Message.Frames {
		if c, ok := f.(*ssp2.Commit); ok {
			seq = max(seq, c.CommitSeq)
		}
	}
	return seq
}

// idleSockets are the propagation run's idle connections.
type idleSockets struct {
	clients []*wsClient
}

func propagation() *scenario {
	return &scenario{
		name: "propagation",
		about: "each client is a pair: a writer (over --transport) and a receiver on its realtime socket subscribed to the " +
			"writer's project; the writer pushes one commit and waits for the receiver to get it; \"propagation\" is push " +
			"acknowledgement to delta, \"push-delta\" push start to delta; --idle-sockets more sockets stay connected " +
			"meanwhile (server RSS per 1,000 of them with --server-pid)",
		kinds:   []string{"propagation", "push-delta", "push", "pull", "bootstrap", "connect"},
		prepare: connectIdle,
		init: func(ctx context.Context, e *env, v *vu) error {
			if r, ok := v.state.(*receiver); ok {
				_ = r.stop()
				v.state = nil
			}
			if err := initOwn(ctx, e, v); err != nil {
				return err
			}
			w, err := e.realtimeClient(v.c.ClientID()+"-rx", v.idx, e.baseURL(v.idx+1))
			if err != nil {
				return err
			}
			if err := e.connect(ctx, w); err != nil {
				return err
			}
			rv := &vu{idx: v.idx, c: w}
			if _, err := e.bootstrap(ctx, rv, "own", e.project(v.idx)); err != nil {
				w.Close()
				return err
			}
			rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			r := &receiver{w: w, arrived: make(chan arrival, 16), cancel: cancel, done: make(chan struct{})}
			go r.serve(rctx)
			v.state = r
			return nil
		},
		step: func(ctx context.Context, e *env, v *vu) error {
			r := v.state.(*receiver)
			start := time.Now()
			if err := e.pushRound(ctx, v, e.project(v.idx), e.o.rowsPerClient); err != nil {
				return err
			}
			acked := time.Now()
			seq := v.lastSeq
			wait := time.NewTimer(e.o.timeout)
			defer wait.Stop()
			for {
				select {
				case a := <-r.arrived:
					if a.seq < seq {
						continue
					}
					e.record("propagation", a.at.Sub(acked))
					e.record("push-delta", a.at.Sub(start))
					if a.at.Before(acked) {
						e.count(&e.rt.beforeAck)
					}
					if a.round {
						e.count(&e.rt.byRound)
					}
					return nil
				case <-r.done:
					err := fmt.Errorf("receiver socket ended: %w", r.err)
					e.fail("propagation", err)
					return err
				case <-wait.C:
					err := protoErr("loader.no_delta", "commit %d not received within %v", seq, e.o.timeout)
					e.fail("propagation", err)
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		},
		finish: func(ctx context.Context, e *env, vus []*vu) error {
			var first error
			for _, v := range vus {
				if r, ok := v.state.(*receiver); ok {
					if err := r.stop(); err != nil && first == nil {
						first = err
					}
				}
			}
			if e.idle != nil {
				for _, w := range e.idle.clients {
					if w.Realtime() == nil && first == nil {
						first = protoErr("loader.idle_socket_lost", "idle socket %s ended during the run", w.ClientID())
					}
					w.Close()
				}
			}
			e.note("deliveredBeforeAck", e.rt.beforeAck.Load())
			e.note("deliveredByRound", e.rt.byRound.Load())
			return first
		},
	}
}

// rtCounters are the propagation run's counters.
type rtCounters struct {
	beforeAck, byRound atomic.Int64
}

func (e *env) count(n *atomic.Int64) { n.Add(1) }

// record adds a latency to kind (a negative one, a delta that beat the
// push's own answer, counts as zero).
func (e *env) record(kind string, d time.Duration) {
	e.ops[kind].h.Record(max(d, 0))
}

// connectIdle connects --idle-sockets clients, each registered on a
// project nobody writes, and measures the server RSS they cost.
func connectIdle(ctx context.Context, e *env) error {
	n := e.o.idleSockets
	e.note("idleSockets", n)
	if n == 0 {
		return nil
	}
	mem := newMemWatch(e.o)
	before := sampleRSS(ctx, mem)
	idle := &idleSockets{clients: make([]*wsClient, n)}
	e.idle = idle
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		mu    sync.Mutex
		first error
	)
	started := time.Now()
	for range min(e.o.dialers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				err := func() error {
					w, err := e.realtimeClient(fmt.Sprintf("load-%s-idle-%d", e.runID, i), e.o.vus+i, e.baseURL(e.o.vus+i))
					if err != nil {
						return err
					}
					idle.clients[i] = w
					rctx, cancel := context.WithTimeout(ctx, e.o.timeout)
					defer cancel()
					if err := w.ensure(rctx); err != nil {
						return err
					}
					w.Subscribe("idle", e.fx.table.Name, e.fx.scopes(e.o.projectPrefix+e.runID+"-idle-"+strconv.Itoa(i)))
					_, err = w.PullUntilIdle(rctx, 10)
					return err
				}()
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("idle socket %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		for _, w := range idle.clients {
			if w != nil {
				w.Close()
			}
		}
		e.idle = nil
		return first
	}
	e.note("idleConnectSeconds", math.Round(time.Since(started).Seconds()*100)/100)
	// Let the server's allocator settle before the second sample.
	pause(ctx, time.Second)
	after := sampleRSS(ctx, mem)
	if before > 0 && after > 0 {
		e.note("serverRSSBeforeIdleMB", math.Round(float64(before)/(1<<20)*10)/10)
		e.note("serverRSSWithIdleMB", math.Round(float64(after)/(1<<20)*10)/10)
		e.note("serverRSSPer1000IdleMB", math.Round(float64(after-before)/float64(n)*1000/(1<<20)*10)/10)
	}
	return nil
}

func sampleRSS(ctx context.Context, m *memWatch) int64 {
	if !m.enabled() {
		return 0
	}
	m.sample(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

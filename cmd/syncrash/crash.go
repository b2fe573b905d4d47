package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/syncdproc"
)

// table is the demo schema table the clients write: one row per
// operation, owned by the client's actor (scope user:{owner_id}).
const table = "lists"

// config is one crash run.
type config struct {
	Binary     string   // the syncd executable
	Database   string   // --database of every server start
	ServerArgs []string // extra "syncd serve" flags
	Clients    int      // concurrent pushing clients
	Ops        int      // rows per commit
	Kills      int      // SIGKILLs to deliver
	MaxCommits int      // per client, a bound on the run
	// KillWithin bounds the random delay between the first
	// acknowledgement after a (re)start and the next kill.
	KillWithin time.Duration
	Seed       uint64
	RunID      string
	ServerLog  io.Writer // every server log line (nil: dropped)
	Progress   io.Writer // one line per kill (nil: quiet)
	ReadyLimit time.Duration
	// beforeRestart runs while the server is down after each kill, with
	// the commits acknowledged so far (tests inject storage faults here
	// to show the checks catch them).
	beforeRestart func(ctx context.Context, acked []ackedCommit) error
}

// ackedCommit is a commit the server acknowledged.
type ackedCommit struct {
	ClientID       string
	ClientCommitID string
	CommitSeq      int64
}

// report is what a run found.
type report struct {
	Seed        uint64
	Kills       int
	Acked       int
	Uncertain   int // in flight at a failure: delivered again
	Survived    int // ... and answered cached: committed before the kill
	Redone      int // ... and answered applied: lost with the process
	ServerError int // retried 5xx answers
	Violations  []string
}

func (r *report) failed() bool { return len(r.Violations) > 0 }

// commitRec is the ledger entry of one commit.
type commitRec struct {
	id        string
	n         int
	rows      []string
	uncertain bool // an attempt failed without an answer
	status    ssp2.PushStatus
	seq       int64
}

// crashClient is one pushing client: its own client id and actor.
type crashClient struct {
	id, actor string
	commits   []*commitRec
}

// runner holds the state of a run.
type runner struct {
	cfg    config
	schema *schema.Schema
	http   *http.Client
	addr   atomic.Pointer[string]

	mu         sync.Mutex
	violations []string
	acks       atomic.Int64
	serverErrs atomic.Int64
	stop       atomic.Bool
	clients    []*crashClient
}

func (r *runner) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) < 200 {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
}

// run drives the clients against a server it kills cfg.Kills times, then
// verifies what the last server returns.
func run(ctx context.Context, cfg config) (*report, error) {
	sc, err := schema.Load(todos.IR())
	if err != nil {
		return nil, err
	}
	if cfg.ReadyLimit <= 0 {
		cfg.ReadyLimit = 2 * time.Minute
	}
	r := &runner{cfg: cfg, schema: sc}
	// Every request dials the current server, whatever port it got.
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, *r.addr.Load())
		},
		MaxIdleConnsPerHost: cfg.Clients + 2,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	r.http = &http.Client{Transport: tr, Timeout: 30 * time.Second}

	node, err := r.start(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { node.Kill() }()
	rep := &report{Seed: cfg.Seed}

	var wg sync.WaitGroup
	clientErrs := make(chan error, cfg.Clients)
	for i := range cfg.Clients {
		c := &crashClient{
			id:    fmt.Sprintf("crash-%s-c%d", cfg.RunID, i),
			actor: fmt.Sprintf("crash-%s-a%d", cfg.RunID, i),
		}
		r.clients = append(r.clients, c)
		wg.Go(func() {
			if err := r.push(ctx, c); err != nil {
				r.stop.Store(true)
				clientErrs <- err
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed))
	for rep.Kills < cfg.Kills && !r.stop.Load() {
		// Kill while commits flow: after the first acknowledgement of
		// this server, at a random moment within KillWithin.
		if !r.waitAck(ctx, done, r.acks.Load()) {
			break
		}
		if !sleep(ctx, done, time.Duration(rng.Int64N(int64(cfg.KillWithin)+1))) {
			break
		}
		node.Kill()
		rep.Kills++
		if cfg.beforeRestart != nil {
			if err := cfg.beforeRestart(ctx, r.acked()); err != nil {
				return nil, fmt.Errorf("before restart: %w", err)
			}
		}
		if node, err = r.start(ctx); err != nil {
			return nil, fmt.Errorf("restart after kill %d: %w", rep.Kills, err)
		}
		if cfg.Progress != nil {
			_, _ = fmt.Fprintf(cfg.Progress, "kill %d/%d: %d commits acknowledged\n", rep.Kills, cfg.Kills, r.acks.Load())
		}
	}
	r.stop.Store(true)
	<-done
	close(clientErrs)
	if err := <-clientErrs; err != nil {
		return nil, err
	}

	r.verify(ctx)
	if err := node.Stop(30 * time.Second); err != nil {
		r.violate("the last server did not stop cleanly on SIGTERM: %v", err)
	}
	for _, c := range r.clients {
		for _, cm := range c.commits {
			rep.Acked++
			if cm.uncertain {
				rep.Uncertain++
				if cm.status == ssp2.PushCached {
					rep.Survived++
				} else {
					rep.Redone++
				}
			}
		}
	}
	rep.ServerError = int(r.serverErrs.Load())
	rep.Violations = r.violations
	return rep, nil
}

// start launches a server on the database and waits until it is ready.
func (r *runner) start(ctx context.Context) (*syncdproc.Node, error) {
	args := append([]string{"--database", r.cfg.Database, "--auth", "dev", "--log-level", "info",
		"--prune-interval", "0"}, r.cfg.ServerArgs...)
	n, err := syncdproc.Start(syncdproc.Options{Binary: r.cfg.Binary, Args: args, Log: r.cfg.ServerLog})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.ReadyLimit)
	defer cancel()
	if err := n.WaitReady(wctx, 10*time.Millisecond); err != nil {
		n.Kill()
		return nil, err
	}
	addr := strings.TrimPrefix(n.BaseURL(), "http://")
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		addr = addr[:i]
	}
	r.addr.Store(&addr)
	return n, nil
}

// waitAck waits for an acknowledgement past from, or for the clients to end.
func (r *runner) waitAck(ctx context.Context, done <-chan struct{}, from int64) bool {
	for r.acks.Load() <= from {
		if !sleep(ctx, done, 5*time.Millisecond) {
			return false
		}
	}
	return true
}

func sleep(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	case <-ctx.Done():
		return false
	}
}

func (r *runner) acked() []ackedCommit {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ackedCommit
	for _, c := range r.clients {
		for _, cm := range c.commits {
			if cm.status != 0 {
				out = append(out, ackedCommit{ClientID: c.id, ClientCommitID: cm.id, CommitSeq: cm.seq})
			}
		}
	}
	return out
}

// newClient is a protocol client of c's identity.
func (r *runner) newClient(c *crashClient) (*client.Client, error) {
	h := http.Header{}
	h.Set("X-Syncd-Actor", c.actor)
	return client.New(client.Options{BaseURL: "http://syncd", Schema: r.schema, ClientID: c.id, Header: h, HTTP: r.http})
}

// operations are the upserts of commit cm by c: one unique row each,
// titled with the commit id, so every row names the commit that wrote it.
func (r *runner) operations(sc *client.Client, c *crashClient, cm *commitRec) ([]ssp2.PushOperation, error) {
	ops := make([]ssp2.PushOperation, 0, len(cm.rows))
	for _, row := range cm.rows {
		op, err := sc.Upsert(table, row, map[string]rowcodec.Value{
			"id": rowcodec.String(row), "owner_id": rowcodec.String(c.actor),
			"title": rowcodec.String(cm.id), "updated_at_ms": rowcodec.Int(int64(cm.n)),
		}, -1)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// push sends c's commits one at a time until the run stops, delivering
// each again after any failure until the server answers for it.
func (r *runner) push(ctx context.Context, c *crashClient) error {
	sc, err := r.newClient(c)
	if err != nil {
		return err
	}
	for n := 0; n < r.cfg.MaxCommits && !r.stop.Load(); n++ {
		cm := &commitRec{id: fmt.Sprintf("%s-%d", c.id, n), n: n}
		for k := range r.cfg.Ops {
			cm.rows = append(cm.rows, fmt.Sprintf("%s.%d", cm.id, k))
		}
		ops, err := r.operations(sc, c, cm)
		if err != nil {
			return err
		}
		sc.QueueWithID(cm.id, ops...)
		res, err := r.deliver(ctx, sc, cm)
		if err != nil {
			return err
		}
		r.mu.Lock()
		cm.status, cm.seq = res.Status, res.CommitSeq
		c.commits = append(c.commits, cm)
		r.mu.Unlock()
		r.acks.Add(1)
		switch {
		case res.Status != ssp2.PushApplied && res.Status != ssp2.PushCached:
			r.violate("commit %s: answered %v, want applied", cm.id, res.Status)
		case res.Status == ssp2.PushCached && !cm.uncertain:
			r.violate("commit %s: its first delivery was answered cached (seq %d): another commit's result", cm.id, res.CommitSeq)
		}
	}
	return nil
}

// deliver pushes until the server answers for cm. A failed attempt
// (transport error, 5xx, 429) leaves the commit uncertain: it may or may
// not have been committed before the server died.
func (r *runner) deliver(ctx context.Context, sc *client.Client, cm *commitRec) (*ssp2.PushResult, error) {
	for {
		res, err := sc.Push(ctx)
		if err == nil {
			for _, p := range res.Pushes {
				if p.ClientCommitID == cm.id {
					return p, nil
				}
			}
			return nil, fmt.Errorf("commit %s: the response carries no PUSH_RESULT for it", cm.id)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var he *client.HTTPError
		if errors.As(err, &he) {
			if he.Status < 500 && he.Status != http.StatusTooManyRequests {
				return nil, fmt.Errorf("commit %s: %w", cm.id, err)
			}
			if he.Status != http.StatusServiceUnavailable {
				r.serverErrs.Add(1)
			}
		}
		cm.uncertain = true
		if !sleep(ctx, nil, 10*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

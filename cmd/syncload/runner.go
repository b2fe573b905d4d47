package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/syncd-dev/syncd/client"
)

// opStats aggregate one kind of operation (push, pull, bootstrap, …).
type opStats struct {
	h     *Histogram
	bytes atomic.Int64
	items atomic.Int64
}

// env is one scenario run: options, fixture, transport, counters.
type env struct {
	o     *options
	fx    *fixture
	t     Transport
	runID string

	segments, segmentBytes atomic.Int64 // segment downloads
	images                 atomic.Int64 // sqlite images imported

	ops    map[string]*opStats // fixed before the virtual clients start
	kinds  []string
	budget atomic.Int64       // remaining requests; < 0 is unlimited
	cancel context.CancelFunc // aborts in-flight requests (signal, --max-errors)
	stop   atomic.Bool        // no new operations (duration or budget spent)

	mu         sync.Mutex
	errors     map[string]int64
	errorCount atomic.Int64
	samples    []string // the first few error messages
	data       map[string]any
	catchup    *catchUpState // set by catch-up's prepare
	idle       *idleSockets  // set by propagation's prepare
	engine     *engineDB     // set by engine-commit's prepare
	floor      *http.Client  // set by engine-http's prepare
	rt         rtCounters
}

func newEnv(o *options, fx *fixture, t Transport, runID string, kinds []string) *env {
	e := &env{o: o, fx: fx, t: t, runID: runID, ops: map[string]*opStats{}, kinds: kinds,
		errors: map[string]int64{}, data: map[string]any{}}
	for _, k := range kinds {
		e.ops[k] = &opStats{h: NewHistogram()}
	}
	if o.requests > 0 {
		e.budget.Store(o.requests)
	} else {
		e.budget.Store(-1)
	}
	return e
}

// take claims one request from the budget; false once it is spent.
func (e *env) take() bool {
	for {
		b := e.budget.Load()
		if b < 0 {
			return true
		}
		if b == 0 {
			e.stop.Store(true)
			return false
		}
		if e.budget.CompareAndSwap(b, b-1) {
			return true
		}
	}
}

// timed runs f as one operation of kind and records its latency, bytes and
// items; a failure is counted by error code unless the run was ending.
func (e *env) timed(ctx context.Context, kind string, f func() (bytes, items int, err error)) error {
	if requestKinds[kind] && !e.take() {
		return errBudgetSpent
	}
	start := time.Now()
	bytes, items, err := f()
	d := time.Since(start)
	if err != nil {
		if errors.Is(err, errBudgetSpent) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.fail(kind, err)
		return err
	}
	st := e.ops[kind]
	st.h.Record(d)
	st.bytes.Add(int64(bytes))
	st.items.Add(int64(items))
	return nil
}

func (e *env) fail(kind string, err error) {
	code := errorCode(err)
	n := e.errorCount.Add(1)
	e.mu.Lock()
	e.errors[code]++
	if len(e.samples) < 5 {
		e.samples = append(e.samples, kind+": "+err.Error())
	}
	e.mu.Unlock()
	if e.o.maxErrors > 0 && n >= int64(e.o.maxErrors) && e.cancel != nil {
		e.cancel()
	}
}

// errBudgetSpent ends a client's loop once --requests is used up.
var errBudgetSpent = errors.New("request budget spent")

// vu is one virtual client.
type vu struct {
	idx   int
	c     SyncClient
	n     int64
	rnd   *rand.Rand
	ready bool
	last  client.Stats // counters at the previous delta
	state any          // the scenario's own per-client state
	// lastSeq is the commit seq of the client's last acknowledged push.
	lastSeq int64
}

// delta returns what the client received since the last call.
func (v *vu) delta() client.Stats {
	now := v.c.Stats()
	d := client.Stats{
		Requests: now.Requests - v.last.Requests, Commits: now.Commits - v.last.Commits,
		InlineSegments: now.InlineSegments - v.last.InlineSegments, SegmentRefs: now.SegmentRefs - v.last.SegmentRefs,
		SegmentDownloads: now.SegmentDownloads - v.last.SegmentDownloads, SegmentBytes: now.SegmentBytes - v.last.SegmentBytes,
		BootstrapRows: now.BootstrapRows - v.last.BootstrapRows, ResponseBodyBytes: now.ResponseBodyBytes - v.last.ResponseBodyBytes,
		Images: now.Images - v.last.Images,
	}
	v.last = now
	return d
}

// scenario is one load shape.
type scenario struct {
	name  string
	about string
	kinds []string
	// prepare runs once before the virtual clients start (not timed).
	prepare func(ctx context.Context, e *env) error
	// init readies a virtual client (timed operations allowed); it runs
	// again after a failed step.
	init func(ctx context.Context, e *env, v *vu) error
	// step is one iteration of the client's loop.
	step func(ctx context.Context, e *env, v *vu) error
	// background, when set, starts load beside the virtual clients for
	// the whole run; the returned func stops it and notes its figures.
	background func(ctx context.Context, e *env) func()
	// finish, when set, runs once after the virtual clients stopped (not
	// timed): convergence checks and cleanup.
	finish func(ctx context.Context, e *env, vus []*vu) error
}

// closer is a client holding a socket to close at the end of a run.
type closer interface{ Close() }

// run drives o.vus virtual clients until the duration or the request
// budget is spent (whichever first), then reports.
func run(ctx context.Context, e *env, sc *scenario) (*Result, error) {
	if sc.prepare != nil {
		pctx, cancel := context.WithTimeout(ctx, e.o.prepareTimeout)
		err := sc.prepare(pctx, e)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s: prepare: %w", sc.name, err)
		}
	}
	mem := newMemWatch(e.o)
	mem.sample(ctx)
	// The run ends gracefully: once --duration (or --requests) is spent
	// no client starts a new operation, and requests in flight complete
	// (bounded by --timeout), so the server never sees a client vanish
	// mid-request unless the run is interrupted or fails (--max-errors).
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.cancel = cancel
	watchCtx, stopWatch := context.WithCancel(runCtx)
	stopMem := mem.watch(watchCtx)
	stopBackground := func() {}
	if sc.background != nil {
		stopBackground = sc.background(runCtx, e)
	}
	start := time.Now()
	timer := time.AfterFunc(e.o.duration, func() { e.stop.Store(true) })
	defer timer.Stop()
	var wg sync.WaitGroup
	vus := make([]*vu, 0, e.o.vus)
	defer func() {
		for _, v := range vus {
			if c, ok := v.c.(closer); ok {
				c.Close()
			}
		}
	}()
	for i := range e.o.vus {
		v := &vu{idx: i, rnd: rand.New(rand.NewPCG(uint64(i)+1, uint64(start.UnixNano())))}
		vus = append(vus, v)
		c, err := e.t.NewClient(fmt.Sprintf("load-%s-%d", e.runID, i), e.baseURL(i), e.identity(i))
		if err != nil {
			cancel()
			wg.Wait()
			stopWatch()
			stopMem()
			stopBackground()
			return nil, err
		}
		v.c = c
		wg.Go(func() {
			for runCtx.Err() == nil && !e.stop.Load() {
				if !v.ready {
					if sc.init != nil {
						if err := sc.init(runCtx, e, v); err != nil {
							pause(runCtx, 50*time.Millisecond)
							continue
						}
					}
					v.ready = true
				}
				if err := sc.step(runCtx, e, v); err != nil {
					v.ready = false
					pause(runCtx, 10*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopWatch()
	stopMem()
	mem.sample(context.Background())
	stopBackground()
	if sc.finish != nil {
		fctx, fcancel := context.WithTimeout(ctx, e.o.prepareTimeout)
		err := sc.finish(fctx, e, vus)
		fcancel()
		if err != nil {
			e.fail("finish", err)
		}
	}
	return e.result(sc, elapsed, mem), nil
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// OpResult is one kind's figures.
type OpResult struct {
	Kind      string  `json:"kind"`
	Count     uint64  `json:"count"`
	PerSecond float64 `json:"perSecond"`
	P50ms     float64 `json:"p50Ms"`
	P95ms     float64 `json:"p95Ms"`
	P99ms     float64 `json:"p99Ms"`
	MaxMs     float64 `json:"maxMs"`
	MeanMs    float64 `json:"meanMs"`
	Bytes     int64   `json:"bytes"`
	Items     int64   `json:"items"`
}

// Result is one scenario run.
type Result struct {
	Scenario       string           `json:"scenario"`
	URL            string           `json:"url"`
	Wire           int              `json:"wire"`
	VUs            int              `json:"vus"`
	Seconds        float64          `json:"seconds"`
	Requests       uint64           `json:"requests"`
	RequestsPerSec float64          `json:"requestsPerSecond"`
	Ops            []OpResult       `json:"ops"`
	Errors         int64            `json:"errors"`
	ErrorCodes     map[string]int64 `json:"errorCodes,omitempty"`
	ErrorSamples   []string         `json:"errorSamples,omitempty"`
	Memory         *MemResult       `json:"serverMemory,omitempty"`
	Notes          map[string]any   `json:"notes,omitempty"`
}

// requestKinds are the operations that are one HTTP request each.
var requestKinds = map[string]bool{"push": true, "pull": true, "commit": true, "query": true}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (e *env) result(sc *scenario, elapsed time.Duration, mem *memWatch) *Result {
	r := &Result{Scenario: sc.name, URL: strings.Join(e.o.urls, ","), Wire: e.o.wire, VUs: e.o.vus, Seconds: elapsed.Seconds(),
		Errors: e.errorCount.Load(), Memory: mem.result()}
	for _, k := range e.kinds {
		st := e.ops[k]
		h := st.h
		r.Ops = append(r.Ops, OpResult{Kind: k, Count: h.Count(), PerSecond: float64(h.Count()) / elapsed.Seconds(),
			P50ms: ms(h.Quantile(0.50)), P95ms: ms(h.Quantile(0.95)), P99ms: ms(h.Quantile(0.99)),
			MaxMs: ms(h.Max()), MeanMs: ms(h.Mean()), Bytes: st.bytes.Load(), Items: st.items.Load()})
		if requestKinds[k] {
			r.Requests += h.Count()
		}
	}
	r.RequestsPerSec = float64(r.Requests) / elapsed.Seconds()
	if n := e.segments.Load(); n > 0 {
		e.note("segmentDownloads", n)
		e.note("segmentMB", math.Round(float64(e.segmentBytes.Load())/(1<<20)*10)/10)
	}
	if n := e.images.Load(); n > 0 {
		e.note("imagesImported", n)
	}
	e.mu.Lock()
	if len(e.errors) > 0 {
		r.ErrorCodes = e.errors
		r.ErrorSamples = e.samples
	}
	if len(e.data) > 0 {
		r.Notes = e.data
	}
	e.mu.Unlock()
	return r
}

func (e *env) note(k string, v any) {
	e.mu.Lock()
	e.data[k] = v
	e.mu.Unlock()
}

func sortedKeys(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

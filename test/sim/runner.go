package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Options configure one run.
type Options struct {
	// Seed selects the history; one seed is one history.
	Seed int64
	// Steps is the history's length (default 300); Clients the simulated
	// replicas (default 4, two per actor); Workspaces the scope values
	// (default 3).
	Steps, Clients, Workspaces int
	// CheckpointEvery puts a checkpoint step every so many steps (default
	// 60; negative: none but the final check).
	CheckpointEvery int
	// Engine is memory, sqlite or postgres (default memory); Dir holds
	// SQLite files and image scratch files (default the system temporary
	// directory); PostgresURL names the PostgreSQL database.
	Engine      string
	Dir         string
	PostgresURL string
	// Images has the clients take SQLite-image bootstrap segments.
	Images bool
	// Keep, when not nil, runs only the steps it lists (a shrunk history).
	Keep []int
	// Break runs a deliberately broken server.
	Break Breakage
	// Trace receives every event line as it happens.
	Trace io.Writer
}

func (o Options) withDefaults() Options {
	if o.Steps <= 0 {
		o.Steps = 300
	}
	if o.Clients <= 0 {
		o.Clients = 4
	}
	if o.Workspaces <= 0 {
		o.Workspaces = 3
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = 60
	}
	if o.Engine == "" {
		o.Engine = "memory"
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	return o
}

// Report is what one run did.
type Report struct {
	Seed   int64
	Engine string
	// Hash is the SHA-256 of the run's event log: the same seed and
	// options give the same hash.
	Hash string
	// Executed counts the steps run.
	Executed int
	Stats    Stats
	// Failure is the first invariant the run broke, nil when none.
	Failure *Failure
	// Tail is the last events before the end (or the failure).
	Tail []string
}

// Stats count what a run exercised.
type Stats struct {
	// Operations are the row operations the clients queued, Requests the
	// requests they sent, Commits the commits the server decided.
	Operations                                               int
	Requests, Commits, Applied, Rejected, Conflicts, Replays int
	CursorExpired, Revoked, Bootstraps, Resets               int
	Prunes, PrunedCommits, Restarts, Notices, LostRequests   int
	// Images and SegmentDownloads count what the clients imported and
	// fetched by reference during bootstraps.
	Images, SegmentDownloads int
	Faults                   map[string]int
	Codes                    map[string]int
}

func (s *Stats) add(o Stats) {
	s.Operations += o.Operations
	s.Requests += o.Requests
	s.Commits += o.Commits
	s.Applied += o.Applied
	s.Rejected += o.Rejected
	s.Conflicts += o.Conflicts
	s.Replays += o.Replays
	s.CursorExpired += o.CursorExpired
	s.Revoked += o.Revoked
	s.Bootstraps += o.Bootstraps
	s.Resets += o.Resets
	s.Prunes += o.Prunes
	s.PrunedCommits += o.PrunedCommits
	s.Restarts += o.Restarts
	s.Notices += o.Notices
	s.LostRequests += o.LostRequests
	s.Images += o.Images
	s.SegmentDownloads += o.SegmentDownloads
	for k, v := range o.Faults {
		if s.Faults == nil {
			s.Faults = map[string]int{}
		}
		s.Faults[k] += v
	}
	for k, v := range o.Codes {
		if s.Codes == nil {
			s.Codes = map[string]int{}
		}
		s.Codes[k] += v
	}
}

// Add sums another run's counts into s.
func (s *Stats) Add(o Stats) { s.add(o) }

// Failure is a broken invariant.
type Failure struct {
	// Kind names the invariant (stable across runs: shrinking keeps a
	// history only while it fails with the same kind).
	Kind string
	// Step is the index of the step that broke it.
	Step    int
	Message string
}

func (f *Failure) Error() string { return fmt.Sprintf("step %d: %s: %s", f.Step, f.Kind, f.Message) }

// simClient is one simulated replica: the Go client with its own local
// store, its actor, its subscriptions and what the runner knows of it.
type simClient struct {
	idx    int
	id     string
	actor  string
	c      *client.Client
	online bool
	// subs are the subscribed (table, ws) pairs by subscription id.
	subs map[string]subKey
	// intents are the queued commits by client commit id.
	intents map[string][]mop
	next    int
	// acked is the seq of every commit acknowledged as applied.
	acked map[string]int64
	// handed is what the server last recorded for it (§4.5): the minimum
	// cursor of the active sections of its last pull answered, and when.
	handed, handedAt int64
	hasHanded        bool
	// live: notices wake it.
	live bool
}

type subKey struct{ table, ws string }

func subID(table, ws string) string { return table + "/" + ws }

// runner executes one history.
type runner struct {
	o       Options
	sch     *schema.Schema
	codecs  map[string]*rowcodec.Codec
	clock   *clock.Virtual
	engine  Engine
	srv     *server
	model   *model
	clients []*simClient
	ws      []string
	grants  map[string]map[string]bool // actor → ws → granted
	actors  []string

	step    int
	rng     *rand.Rand
	fault   *armed
	netF    netFault
	crashed bool
	epochs  int
	reqNo   int
	noticed map[int64]bool
	notices []int64
	stats   Stats
	failure *Failure

	h    hash.Hash
	tail []string
}

// setNet arms what the network does to the next request (the transport
// reads it once).
func (r *runner) setNet(f netFault) { r.netF = f }

const tailLen = 40

// event appends a line to the event log (its hash is the run's identity).
func (r *runner) event(format string, args ...any) {
	line := fmt.Sprintf("%d %s", r.step, fmt.Sprintf(format, args...))
	r.h.Write([]byte(line))
	r.h.Write([]byte{'\n'})
	if r.o.Trace != nil {
		fmt.Fprintln(r.o.Trace, line)
	}
	r.tail = append(r.tail, line)
	if len(r.tail) > tailLen {
		r.tail = r.tail[len(r.tail)-tailLen:]
	}
}

// failf records the run's first broken invariant; the run stops after
// the current step.
func (r *runner) failf(kind, format string, args ...any) {
	if r.failure != nil {
		return
	}
	r.failure = &Failure{Kind: kind, Step: r.step, Message: fmt.Sprintf(format, args...)}
	r.event("FAIL %s: %s", kind, r.failure.Message)
}

// mintEpoch names log epochs by count, so a run's epochs are its seed's.
func (r *runner) mintEpoch() string {
	r.epochs++
	return "epoch-" + strconv.Itoa(r.epochs)
}

// Run executes the history of o.Seed and checks it. The error is a setup
// failure (the engine could not open); a broken invariant is the report's
// Failure.
func Run(ctx context.Context, o Options) (*Report, error) {
	o = o.withDefaults()
	sch, err := loadSchema()
	if err != nil {
		return nil, err
	}
	eng, err := NewEngine(o.Engine, o.Dir, o.PostgresURL)
	if err != nil {
		return nil, err
	}
	r := &runner{o: o, sch: sch, codecs: map[string]*rowcodec.Codec{}, engine: eng, model: newModel(sch),
		clock: clock.NewVirtual(1_800_000_000_000), grants: map[string]map[string]bool{}, noticed: map[int64]bool{},
		h: sha256.New(), stats: Stats{Faults: map[string]int{}, Codes: map[string]int{}}}
	for _, t := range sch.Tables {
		r.codecs[t.Name] = rowcodec.New(t)
	}
	defer func() { _ = eng.Cleanup() }()
	if r.srv, err = newServer(ctx, r); err != nil {
		return nil, err
	}
	defer func() { _ = r.srv.close() }()
	if err := r.setup(); err != nil {
		return nil, err
	}
	steps := Generate(o)
	keep := map[int]bool{}
	for _, i := range o.Keep {
		keep[i] = true
	}
	executed := 0
	for i, st := range steps {
		if o.Keep != nil && !keep[i] {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.step = i
		r.rng = rand.New(rand.NewPCG(st.Seed, uint64(o.Seed)))
		r.exec(ctx, st)
		executed++
		if r.failure != nil {
			break
		}
	}
	if r.failure == nil {
		r.step = len(steps)
		// The final check's own choices (the app's answer to a conflict).
		r.rng = rand.New(rand.NewPCG(uint64(o.Seed), 0xf17a1))
		r.final(ctx)
	}
	for _, sc := range r.clients {
		cs := sc.c.Stats()
		r.stats.Images += cs.Images
		r.stats.SegmentDownloads += cs.SegmentDownloads
	}
	return &Report{Seed: o.Seed, Engine: o.Engine, Hash: hex.EncodeToString(r.h.Sum(nil)), Executed: executed,
		Stats: r.stats, Failure: r.failure, Tail: append([]string(nil), r.tail...)}, nil
}

// setup creates the workspaces, actors, grants and clients: every client
// starts online, subscribed to every table of its actor's first grant.
func (r *runner) setup() error {
	init := rand.New(rand.NewPCG(uint64(r.o.Seed), 0x1417))
	for i := range r.o.Workspaces {
		r.ws = append(r.ws, "w"+strconv.Itoa(i+1))
	}
	nActors := max(1, (r.o.Clients+1)/2)
	for a := range nActors {
		name := "a" + strconv.Itoa(a+1)
		r.actors = append(r.actors, name)
		g := map[string]bool{}
		first := init.IntN(len(r.ws))
		g[r.ws[first]] = true
		if init.IntN(2) == 0 {
			g[r.ws[(first+1)%len(r.ws)]] = true
		}
		r.grants[name] = g
		r.pushGrant(name)
	}
	for i := range r.o.Clients {
		sc := &simClient{idx: i, id: "c" + strconv.Itoa(i+1), actor: r.actors[i%nActors], online: true,
			subs: map[string]subKey{}, intents: map[string][]mop{}, acked: map[string]int64{}, live: init.IntN(2) == 0, handed: -1}
		accept := ssp2.AcceptInlineRows | ssp2.AcceptExternalRows
		if r.o.Images && init.IntN(2) == 0 {
			accept |= ssp2.AcceptSQLite
		}
		c, err := client.New(client.Options{
			BaseURL: "http://sim", Schema: r.sch, ClientID: sc.id,
			Header:         http.Header{"X-Actor": []string{sc.actor}},
			HTTP:           &http.Client{Transport: &transport{r: r, sc: sc}},
			AcceptEncoding: "identity", Accept: accept,
			// Small limits: windows truncate and bootstraps page.
			LimitCommits: 8, LimitSnapshotRows: int32(2 + i%3),
		})
		if err != nil {
			return err
		}
		sc.c = c
		for _, w := range sortedKeys(r.grants[sc.actor])[:1] {
			for _, t := range tableNames {
				r.subscribe(sc, t, w)
			}
		}
		r.clients = append(r.clients, sc)
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (r *runner) pushGrant(actor string) {
	r.srv.grants.Set(actor, scopes.Allowed{"ws": sortedKeys(r.grants[actor])})
}

func (r *runner) granted(actor, ws string) bool { return r.grants[actor][ws] }

func (r *runner) subscribe(sc *simClient, table, ws string) {
	id := subID(table, ws)
	if _, ok := sc.subs[id]; ok {
		return
	}
	sc.subs[id] = subKey{table, ws}
	sc.c.Subscribe(id, table, map[string][]string{"ws": {ws}})
}

// unsubscribe drops a subscription and evicts its rows (§4.8: eviction
// fused with unsubscription).
func (r *runner) unsubscribe(sc *simClient, id string) {
	key := sc.subs[id]
	delete(sc.subs, id)
	if s := sc.c.Subscription(id); r.o.Break == BreakEvictAfterReset && s != nil && s.Status == ssp2.SubReset {
		sc.c.Unsubscribe(id) // the breakage: the reset's empty echo left nothing to evict by
	} else {
		sc.c.UnsubscribeAndEvict(id)
	}
	// The replica holds a (table, ws) pair through this one subscription:
	// evicted, none of its rows is left.
	for _, rid := range sc.c.RowIDs(key.table) {
		if v, _, ok := sc.c.Get(key.table, rid); ok {
			if w, _ := rowcodec.ScopeString(v["ws"]); w == key.ws {
				r.failf("eviction-incomplete", "%s unsubscribed %s but holds %s/%s", sc.id, id, key.table, rid)
				return
			}
		}
	}
}

// fire reports whether the armed fault fires at p.
func (r *runner) fire(p point) bool {
	f := r.fault
	if f == nil || f.fired || !f.kind.at(p) {
		return false
	}
	f.countdown--
	if f.countdown > 0 {
		return false
	}
	f.fired = true
	r.stats.Faults[f.kind.String()]++
	r.event("fault fires: %s", f.kind)
	if f.kind == FaultCrash {
		r.crashed = true
	}
	return true
}

// exec runs one step.
func (r *runner) exec(ctx context.Context, st Step) {
	sc := r.clients[st.Client]
	r.event("step %s", st)
	switch st.Kind {
	case StepWrite:
		r.write(sc)
	case StepSync:
		if sc.online {
			r.setNet(st.Net)
			r.sync(ctx, sc, false)
		}
	case StepPush:
		if sc.online {
			r.sync(ctx, sc, true)
		}
	case StepTick:
		ms := int64(r.rng.IntN(5000))
		if r.rng.IntN(8) == 0 {
			ms = activeWindow.Milliseconds() + int64(r.rng.IntN(300_000)) // past the active window
		}
		_, _ = r.clock.Advance(ms)
		r.event("clock +%dms", ms)
	case StepOffline:
		sc.online = false
	case StepOnline:
		sc.online = true
	case StepSubscribe:
		t := tableNames[r.rng.IntN(len(tableNames))]
		w := r.ws[r.rng.IntN(len(r.ws))]
		r.subscribe(sc, t, w)
		r.event("%s subscribes %s", sc.id, subID(t, w))
	case StepUnsubscribe:
		ids := sortedSubs(sc)
		if len(ids) > 0 {
			id := ids[r.rng.IntN(len(ids))]
			r.unsubscribe(sc, id)
			r.event("%s unsubscribes %s", sc.id, id)
		}
	case StepGrant, StepRevoke:
		a := r.actors[r.rng.IntN(len(r.actors))]
		w := r.ws[r.rng.IntN(len(r.ws))]
		r.grants[a][w] = st.Kind == StepGrant
		r.pushGrant(a)
		r.event("%s %s %s", st.Kind, a, w)
	case StepFault:
		if !sc.online {
			return
		}
		if st.Fault == FaultPrune && r.rng.IntN(2) == 0 {
			// The client comes back after the active window: its record
			// no longer holds the horizon, and the prune races its pull.
			ms := activeWindow.Milliseconds() + int64(r.rng.IntN(60_000))
			_, _ = r.clock.Advance(ms)
			r.event("clock +%dms", ms)
		}
		// Statements and reads are many per request, commits, record
		// writes and window reads few.
		n := 2
		if st.Fault == FaultStatement || st.Fault == FaultRead {
			n = 6
		}
		r.fault = &armed{kind: st.Fault, countdown: 1 + r.rng.IntN(n)}
		r.sync(ctx, sc, r.rng.IntN(4) == 0)
		r.fault = nil
	case StepPrune:
		r.pruneNow(ctx, "scheduled")
	case StepWake:
		r.wake(ctx)
	case StepRestart:
		r.restart(ctx, "restart")
	case StepCheckpoint:
		r.checkpoint(ctx)
	case StepRotate:
		if _, err := r.srv.inner.RotateLogEpoch(ctx, partition); syncerr.CodeOf(err) == syncerr.StoragePartitionUnregistered {
			r.event("rotation refused: no request named the partition yet")
			return
		} else if err != nil {
			r.failf("infra", "rotate the log epoch: %v", err)
			return
		}
		r.event("log epoch rotated")
		for _, sc := range r.clients {
			sc.handed = -1 // rotation deletes the client records
		}
	}
	if r.crashed {
		r.crashed = false
		r.restart(ctx, "crash")
	}
}

func sortedSubs(sc *simClient) []string {
	ids := make([]string, 0, len(sc.subs))
	for id := range sc.subs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (r *runner) restart(ctx context.Context, why string) {
	r.stats.Restarts++
	r.event("server %s", why)
	if err := r.srv.restart(ctx); err != nil {
		r.failf("infra", "restart: %v", err)
	}
}

// pruneNow runs a retention pass down to the active clients' floors and
// checks it against §4.6: the horizon never passes the cursor the server
// last handed a client still inside the active window.
func (r *runner) pruneNow(ctx context.Context, why string) {
	res, err := r.srv.pruner.PrunePartition(ctx, partition)
	if err != nil {
		r.failf("infra", "prune: %v", err)
		return
	}
	if res.Skipped {
		return
	}
	r.stats.Prunes++
	r.stats.PrunedCommits += int(res.RemovedCommits)
	r.event("prune (%s): horizon %d -> %d", why, res.PreviousHorizonSeq, res.HorizonSeq)
	if res.HorizonSeq < r.model.horizon {
		r.failf("horizon-backwards", "horizon %d below the model's %d", res.HorizonSeq, r.model.horizon)
	}
	if res.HorizonSeq > r.model.horizon {
		now := r.clock.NowMs()
		// The record may be younger than the client's last pull by the
		// client-record refresh (30 s), never older.
		protect := now - (activeWindow - 30*time.Second - time.Second).Milliseconds()
		for _, sc := range r.clients {
			if sc.hasHanded && sc.handed >= 0 && sc.handedAt >= protect && res.HorizonSeq > sc.handed {
				r.failf("horizon-past-active-cursor", "prune raised the horizon to %d past client %s's cursor %d, handed at %d (now %d, active window %s)",
					res.HorizonSeq, sc.id, sc.handed, sc.handedAt, now, activeWindow)
			}
		}
		r.model.prune(res.HorizonSeq)
	}
}

// committed is the fault decorator's report of a push transaction that
// committed: the model decides the commit as the spec says, in the order
// the server committed them.
func (r *runner) committed(clientID, ccid string) {
	if ccid == "" {
		return
	}
	k := ckey{clientID, ccid}
	if _, ok := r.model.results[k]; ok {
		return // a replay found under the lock
	}
	sc := r.clientByID(clientID)
	if sc == nil {
		r.failf("unknown-commit", "client %s unknown", clientID)
		return
	}
	ops, ok := sc.intents[ccid]
	if !ok {
		r.failf("unknown-commit", "commit %s/%s was never queued", clientID, ccid)
		return
	}
	allowed := func(ws string) bool { return r.granted(sc.actor, ws) }
	out, c, changes := r.model.decide(allowed, ops)
	out.decidedAt = r.reqNo
	if out.applied {
		out.seq = r.model.commit(c, changes, clientID, ccid, sc.actor)
		r.stats.Applied++
	} else {
		r.stats.Rejected++
		if out.conflict {
			r.stats.Conflicts++
		}
		r.stats.Codes[out.code]++
	}
	r.model.results[k] = out
	r.stats.Commits++
	r.event("model: %s/%s %s", clientID, ccid, out)
}

func (r *runner) clientByID(id string) *simClient {
	for _, sc := range r.clients {
		if sc.id == id {
			return sc
		}
	}
	return nil
}

// notice is the commit listener's call: every applied commit with changes
// is announced once, after the model saw it commit.
func (r *runner) notice(seq int64, clientID, ccid string, changes int) {
	r.stats.Notices++
	out := r.model.results[ckey{clientID, ccid}]
	switch {
	case out == nil || !out.applied || out.seq != seq:
		r.failf("notice-mismatch", "notice of seq %d for %s/%s, model says %v", seq, clientID, ccid, out)
	case r.noticed[seq]:
		r.failf("notice-twice", "seq %d announced twice", seq)
	case changes == 0 || out.changes != changes:
		r.failf("notice-mismatch", "notice of seq %d with %d changes, model %d", seq, changes, out.changes)
	}
	r.noticed[seq] = true
	r.notices = append(r.notices, seq)
}

// wake delivers one queued notice, in any order or never: a live online
// client hears it and syncs.
func (r *runner) wake(ctx context.Context) {
	if len(r.notices) == 0 {
		return
	}
	i := r.rng.IntN(len(r.notices))
	seq := r.notices[i]
	r.notices = append(r.notices[:i], r.notices[i+1:]...)
	if r.rng.IntN(4) == 0 {
		r.event("notice %d dropped", seq)
		return
	}
	var live []*simClient
	for _, sc := range r.clients {
		if sc.online && sc.live {
			live = append(live, sc)
		}
	}
	r.event("notice %d delivered to %d clients", seq, len(live))
	for _, sc := range live {
		r.sync(ctx, sc, false)
	}
}

// errString is an error's stable rendering for the event log: its
// protocol code, or what kind of failure it was.
func errString(err error) string {
	if err == nil {
		return "ok"
	}
	if code := client.CodeOf(err); code != "" {
		return code
	}
	var he *client.HTTPError
	if errors.As(err, &he) {
		return "http-" + strconv.Itoa(he.Status)
	}
	if errors.Is(err, errLost) {
		return "lost"
	}
	var se *client.SegmentError
	if errors.As(err, &se) {
		return "segment"
	}
	s := err.Error()
	if i := strings.IndexByte(s, ':'); i > 0 {
		s = s[:i]
	}
	return "error(" + s + ")"
}

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// hookLog is a host's event hook that keeps what it heard.
type hookLog struct {
	mu   sync.Mutex
	recs []ports.EventRecord
}

func (h *hookLog) HandleEvent(_ context.Context, r ports.EventRecord) {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
}

func (h *hookLog) all() []ports.EventRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ports.EventRecord(nil), h.recs...)
}

// waitEvent returns the first event of type T that match accepts, waiting
// up to 20 seconds for it (delivery is asynchronous).
func waitEvent[T event.Event](t *testing.T, h *hookLog, match func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, r := range h.all() {
			if e, ok := r.Event.(T); ok && match(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			var zero T
			t.Fatalf("no %s event matched; heard %s", zero.Kind(), describe(h.all()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func describe(rs []ports.EventRecord) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "\n  %d %s %+v", r.Seq, r.Event.Kind(), r.Event)
	}
	return b.String()
}

// carried reports whether any field of any event heard contains text.
func carried(h *hookLog, text string) bool {
	for _, r := range h.all() {
		if strings.Contains(fmt.Sprintf("%+v", r.Event), text) {
			return true
		}
	}
	return false
}

// resolverFor fails the scope resolution of two actors: "broken" with an
// ordinary failure, "down" with an outage.
type resolverFor struct{ next ports.ScopeResolver }

func (r resolverFor) ResolveScopes(ctx context.Context, q ports.ScopeRequest) (scopes.Allowed, error) {
	switch q.ActorID {
	case "broken":
		return nil, errors.New("directory unreachable: tcp 10.0.0.7:389")
	case "down":
		return nil, &ports.OutageError{Cause: errors.New("identity provider timeout")}
	}
	return r.next.ResolveScopes(ctx, q)
}

// A host hook hears the sync path: every request handled, every commit's
// answer (applied, replayed, conflicted, rejected), pulls served and
// failed scope resolutions, with the ids and codes a host keys on and
// nothing of the rows.
func TestEventsOfTheSyncPath(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		h := &hookLog{}
		s := start(t, e, serverOpts{extra: []fx.Option{
			app.WithEventHook(h),
			fx.Decorate(func(r ports.ScopeResolver) ports.ScopeResolver { return resolverFor{r} }),
		}})
		c := call{}
		ep := s.epoch(c)
		waitEvent(t, h, func(e event.RequestHandled) bool {
			return strings.HasPrefix(e.ClientID, "probe-") && e.Code == "" && e.Transport == event.TransportHTTP && e.Partition == "default"
		})
		req := func(commits ...*ssp2.PushCommit) ssptest.Req {
			return ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: commits}
		}
		s.sync(c, req(ssptest.Commit("k1",
			ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "secret-project-name"), -1),
			ssptest.Upsert("tasks", "t-1", task(t, s.sch, "t-1", "p-1", "first"), -1))))
		applied := waitEvent(t, h, func(e event.PushApplied) bool { return e.ClientCommitID == "k1" && !e.Replay })
		if applied.CommitSeq != 1 || applied.Operations != 2 || applied.Changes != 2 ||
			applied.Who != (event.Who{Partition: "default", ActorID: "alice", ClientID: "c1"}) {
			t.Fatalf("applied %+v", applied)
		}
		waitEvent(t, h, func(e event.RequestHandled) bool { return e.ClientID == "c1" && e.Commits == 1 && e.Code == "" })

		tasks := s.sch.Table("tasks")
		s.sync(c, req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-1",
			ssptest.Sparse(t, tasks, ssptest.Cols{"id": rowcodec.String("t-1"), "title": rowcodec.String("second")}), 1))))
		s.sync(c, req(ssptest.Commit("k3", ssptest.Upsert("tasks", "t-1",
			ssptest.Sparse(t, tasks, ssptest.Cols{"id": rowcodec.String("t-1"), "title": rowcodec.String("third")}), 1))))
		cf := waitEvent(t, h, func(e event.PushConflicted) bool { return e.ClientCommitID == "k3" })
		if cf.OpIndex != 0 || cf.ServerVersion != 2 || cf.Replay {
			t.Fatalf("conflicted %+v", cf)
		}
		// A replay of an applied commit is an applied event marked Replay.
		s.sync(c, req(ssptest.Commit("k1", ssptest.Delete("tasks", "t-1"))))
		replay := waitEvent(t, h, func(e event.PushApplied) bool { return e.ClientCommitID == "k1" && e.Replay })
		if replay.CommitSeq != 1 || replay.Changes != 0 {
			t.Fatalf("replay %+v", replay)
		}
		s.sync(c, req(ssptest.Commit("k4", ssptest.Delete("tasks", "t-1"))))
		s.sync(c, req(ssptest.Commit("k5", ssptest.Upsert("tasks", "t-1", task(t, s.sch, "t-1", "p-1", "x"), -1))))
		rj := waitEvent(t, h, func(e event.PushRejected) bool { return e.ClientCommitID == "k5" })
		if rj.Code != "sync.row_deleted" || rj.OpIndex != 0 || rj.Replay {
			t.Fatalf("rejected %+v", rj)
		}

		s.sync(c, ssptest.Req{ClientID: "c2", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true, SubTable: "projects"})
		pulled := waitEvent(t, h, func(e event.PullServed) bool { return e.ClientID == "c2" })
		if pulled.Subscriptions != 1 || pulled.Incremental+pulled.Bootstrap+pulled.Reset+pulled.Revoked != 1 || pulled.Bytes <= 0 {
			t.Fatalf("pull served %+v", pulled)
		}

		// A refused request carries its catalog code.
		s.post(c, []byte("not an ssp2 message"))
		waitEvent(t, h, func(e event.RequestHandled) bool { return e.Code == "sync.invalid_request" })

		// A failing resolver: the request goes on fail closed; an outage
		// without leases refuses it. Neither leaks the resolver's text.
		for _, actor := range []string{"broken", "down"} {
			ac := call{actor: actor}
			aep := s.epoch(ac)
			s.post(ac, ssptest.Req{ClientID: actor + "-1", SchemaVersion: s.sch.Version, Epoch: aep, Commits: []*ssp2.PushCommit{
				ssptest.Commit("b1", ssptest.Upsert("projects", "p-9", project(t, s.sch, "p-9", actor, "n"), -1))}}.Encode(t))
		}
		failed := waitEvent(t, h, func(e event.ScopeResolutionFailed) bool { return e.ActorID == "broken" })
		if failed.Outage || failed.Code != "" || failed.Operation != event.OperationSync || failed.ClientID != "broken-1" {
			t.Fatalf("resolution failed %+v", failed)
		}
		waitEvent(t, h, func(e event.PushRejected) bool { return e.ActorID == "broken" && e.Code == "sync.forbidden" })
		outage := waitEvent(t, h, func(e event.ScopeResolutionFailed) bool { return e.ActorID == "down" })
		if !outage.Outage || outage.Code != "sync.auth_lease_required" {
			t.Fatalf("outage %+v", outage)
		}
		waitEvent(t, h, func(e event.RequestHandled) bool { return e.ActorID == "down" && e.Code == "sync.auth_lease_required" })

		for _, text := range []string{"secret-project-name", "10.0.0.7", "identity provider"} {
			if carried(h, text) {
				t.Fatalf("an event carries %q", text)
			}
		}
		// One sequence, in emission order.
		for i, r := range h.all() {
			if r.Seq != uint64(i+1) || r.At.IsZero() {
				t.Fatalf("record %d: seq %d at %v", i, r.Seq, r.At)
			}
		}
	})
}

// Every authorized segment download is an event, with its partition,
// segment and size; a 304 is one too, and a download whose scope
// resolution failed is a failed resolution.
func TestEventsOfSegmentDownloads(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		h := &hookLog{}
		s := startSegments(t, e, nil, app.WithEventHook(h),
			fx.Decorate(func(r ports.ScopeResolver) ports.ScopeResolver { return resolverFor{r} }))
		seedRows(t, s.store, s.sch, "seg", "alice", "p", 700, 700)
		c := s.newClient(t, "alice", "seg", "", func(o *client.Options) { o.MaxSnapshotPages = 1 })
		c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		if _, err := c.PullUntilIdle(context.Background(), 20); err != nil {
			t.Fatal(err)
		}
		st := c.Stats()
		if st.SegmentDownloads < 1 {
			t.Fatalf("client downloaded no segment: %+v", st)
		}
		n := 0
		for range 500 {
			n = 0
			for _, r := range h.all() {
				if d, ok := r.Event.(event.SegmentDownloaded); ok {
					// Bytes are what went on the wire (compressed here).
					if d.Partition != "seg" || d.ActorID != "alice" || d.Signed || d.NotModified || d.Bytes <= 0 ||
						d.Code != "" || d.SegmentID == "" || d.Encoding == "" {
						t.Fatalf("download %+v", d)
					}
					n++
				}
			}
			if n >= st.SegmentDownloads {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if n != st.SegmentDownloads {
			t.Fatalf("%d download events for the client's %d downloads", n, st.SegmentDownloads)
		}
		// A revalidation answered 304 is a download event too.
		first := waitEvent(t, h, func(e event.SegmentDownloaded) bool { return true })
		req, _ := http.NewRequest(http.MethodGet, s.base+"/segments/"+first.SegmentID, nil)
		req.Header.Set("X-Syncd-Actor", "alice")
		req.Header.Set("X-Syncd-Partition", "seg")
		req.Header.Set("X-Syncular-Scopes", `{"owner":["alice"]}`)
		req.Header.Set("If-None-Match", `"`+first.SegmentID+`"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Fatalf("revalidation answered %d", resp.StatusCode)
		}
		nm := waitEvent(t, h, func(e event.SegmentDownloaded) bool { return e.NotModified })
		if nm.SegmentID != first.SegmentID || nm.Bytes != 0 {
			t.Fatalf("not modified %+v", nm)
		}
		req.Header.Set("X-Syncd-Actor", "broken")
		req.Header.Del("If-None-Match")
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("download with a failing resolver answered %d", resp.StatusCode)
		}
		rf := waitEvent(t, h, func(e event.ScopeResolutionFailed) bool { return e.ActorID == "broken" })
		if rf.Operation != event.OperationSegment || rf.Partition != "seg" || rf.Code != "sync.forbidden" || rf.Outage {
			t.Fatalf("segment resolution failed %+v", rf)
		}
		waitEvent(t, h, func(e event.PullServed) bool { return e.Partition == "seg" && e.Bootstrap == 1 })
	})
}

// A socket's connect, its rounds (as realtime requests) and its end are
// events.
func TestEventsOfRealtimeSockets(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		h := &hookLog{}
		s := start(t, e, serverOpts{extra: []fx.Option{app.WithEventHook(h)}})
		c := call{actor: "alice"}
		ep := s.epoch(c)
		k := dial(t, s, c, "rt-1")
		if _, ok := k.event().(*realtime.Hello); !ok {
			t.Fatal("no hello")
		}
		conn := waitEvent(t, h, func(e event.RealtimeConnected) bool { return e.ClientID == "rt-1" })
		if conn.ActorID != "alice" || conn.Partition != "default" || conn.SessionID == "" {
			t.Fatalf("connected %+v", conn)
		}
		k.round(ssptest.Req{ClientID: "rt-1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("r1", ssptest.Upsert("projects", "p-r", project(t, s.sch, "p-r", "alice", "n"), -1))}}.Encode(t), 1<<10)
		waitEvent(t, h, func(e event.RequestHandled) bool {
			return e.ClientID == "rt-1" && e.Transport == event.TransportRealtime && e.Commits == 1 && e.Code == ""
		})
		waitEvent(t, h, func(e event.PushApplied) bool { return e.ClientCommitID == "r1" && e.ClientID == "rt-1" })
		_ = k.c.Close(websocket.StatusNormalClosure, "bye")
		gone := waitEvent(t, h, func(e event.RealtimeDisconnected) bool { return e.SessionID == conn.SessionID })
		if gone.ClientID != "rt-1" || gone.CloseCode != int64(websocket.StatusNormalClosure) {
			t.Fatalf("disconnected %+v", gone)
		}
	})
}

// reactiveStore is the harness's store with the engine's reaction queue.
type reactiveStore struct {
	*gatedStore
	ports.ReactionQueue
}

// withReactionQueue shows the engine's reaction queue, which the
// harness's store wrapper hides, to the server: the runner needs it, and
// so do the reaction rules of --rules.
func withReactionQueue() fx.Option {
	return fx.Decorate(func(st ports.Storage) ports.Storage {
		g := st.(*gatedStore)
		return reactiveStore{g, g.Storage.(ports.ReactionQueue)}
	})
}

// welcomeReactions makes the harness's server plan project.welcome for
// every new project and deliver reactions.
func welcomeReactions() fx.Option {
	return fx.Options(
		withReactionQueue(),
		app.ProvideReactionPlanner(func() welcomePlanner { return welcomePlanner{} }),
	)
}

// flakyHandler fails each reaction's first attempt when its key asks for it.
type flakyHandler struct {
	mu    sync.Mutex
	tried map[string]int
}

func (*flakyHandler) Type() string { return "project.welcome" }

func (f *flakyHandler) HandleReaction(_ context.Context, d ports.ReactionDelivery) error {
	f.mu.Lock()
	f.tried[d.IdempotencyKey]++
	n := f.tried[d.IdempotencyKey]
	f.mu.Unlock()
	switch {
	case strings.Contains(d.IdempotencyKey, "p-dead"):
		return &ports.ReactionError{Code: "app.bad_address", Permanent: true}
	case strings.Contains(d.IdempotencyKey, "p-flaky") && n == 1:
		return errors.New("smtp: connection reset by 10.1.1.1")
	}
	return nil
}

// A reaction's transitions after delivery are events: completed,
// scheduled for a retry, dead-lettered.
func TestEventsOfReactionTransitions(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		h := &hookLog{}
		s := start(t, e, serverOpts{extra: []fx.Option{
			app.WithEventHook(h),
			welcomeReactions(),
			app.ProvideReactionHandler(func() *flakyHandler { return &flakyHandler{tried: map[string]int{}} }),
		}})
		c := call{}
		ep := s.epoch(c)
		var commits []*ssp2.PushCommit
		for i, id := range []string{"p-ok", "p-dead", "p-flaky"} {
			commits = append(commits, ssptest.Commit(fmt.Sprint("w", i), ssptest.Upsert("projects", id, project(t, s.sch, id, "alice", "n"), -1)))
		}
		s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: commits})
		key := func(id string) string { return `welcome:` + id }
		byKey := func(id string, to event.ReactionState) event.ReactionTransitioned {
			return waitEvent(t, h, func(e event.ReactionTransitioned) bool {
				return strings.Contains(e.IdempotencyKey, key(id)) && e.To == to
			})
		}
		ok := byKey("p-ok", event.ReactionCompleted)
		if ok.Partition != "default" || ok.ReactionType != "project.welcome" || ok.Attempt != 1 || ok.Code != "" {
			t.Fatalf("completed %+v", ok)
		}
		dead := byKey("p-dead", event.ReactionDeadLettered)
		if dead.Code != "app.bad_address" {
			t.Fatalf("dead-lettered %+v", dead)
		}
		retry := byKey("p-flaky", event.ReactionRetrying)
		if retry.Code != "reaction.handler_failed" || retry.RetryAtMs == 0 || retry.Attempt != 1 {
			t.Fatalf("retrying %+v", retry)
		}
		if again := byKey("p-flaky", event.ReactionCompleted); again.Attempt != 2 {
			t.Fatalf("completed after the retry %+v", again)
		}
		if carried(h, "10.1.1.1") {
			t.Fatal("an event carries the handler's error text")
		}
	})
}

// The blob GC (the orphan sweep) of a partition that deleted something
// is an event.
func TestEventsOfTheBlobGC(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		h := &hookLog{}
		clk := &steppedClock{}
		s := startBlobs(t, e, clk, nil, app.WithEventHook(h))
		ctx := context.Background()
		author := s.member(t, "author", "p1")
		if err := author.AcquireEpoch(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := author.UploadBlob(ctx, []byte("an orphan for the sweep"), ""); err != nil {
			t.Fatal(err)
		}
		clk.step(config.DefaultBlobs().OrphanGrace + time.Minute)
		if _, err := s.svc.CollectAll(ctx); err != nil {
			t.Fatal(err)
		}
		sw := waitEvent(t, h, func(e event.BlobSwept) bool { return e.Partition == "att" })
		if sw.Claimed != 1 || sw.Deleted != 1 || sw.Code != "" {
			t.Fatalf("swept %+v", sw)
		}
	})
}

// A scheduled retention pass reports each partition's completed prune.
func TestEventsOfScheduledPrunes(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		h := &hookLog{}
		s := start(t, e, serverOpts{extra: []fx.Option{app.WithEventHook(h)}, config: func(c *config.Config) {
			c.Retention.PruneInterval = 20 * time.Millisecond
		}})
		c := call{}
		ep := s.epoch(c)
		s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "n"), -1))}})
		p := waitEvent(t, h, func(e event.PruneCompleted) bool { return e.Partition == "default" })
		// The §4.6 floors keep a young, short log whole.
		if p.RemovedCommits != 0 || p.HorizonSeq != p.PreviousHorizonSeq {
			t.Fatalf("prune %+v", p)
		}
	})
}

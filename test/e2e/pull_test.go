package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
	"github.com/syncd-dev/syncd/test/testenv"
)

func alice(partition string) call {
	return call{actor: "alice", partition: partition, scopes: `{"owner":["alice"],"project_id":["*"]}`}
}

func sections(resp ssptest.Resp) (starts []*ssp2.SubStart, ends []*ssp2.SubEnd, commits, inline int) {
	for _, f := range resp.Msg.Frames {
		switch f := f.(type) {
		case *ssp2.SubStart:
			starts = append(starts, f)
		case *ssp2.SubEnd:
			ends = append(ends, f)
		case *ssp2.Commit:
			commits++
		case *ssp2.SegmentInline:
			inline++
		}
	}
	return
}

func TestPullEmpty(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		r := newReplica(t, s, alice("empty"), "c1")
		sub := r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		// Fresh: a bootstrap of an empty table is one empty segment, complete.
		resp := r.pull()
		st, en, commits, inline := sections(resp)
		if len(st) != 1 || st[0].Status != ssp2.SubActive || !st[0].Bootstrap || inline != 1 || commits != 0 ||
			en[0].NextCursor != 0 || en[0].BootstrapState.Present {
			t.Fatalf("fresh pull: %+v %+v commits=%d inline=%d", st, en, commits, inline)
		}
		// Caught up: an active incremental section without commits.
		resp = r.pull()
		st, en, commits, inline = sections(resp)
		if st[0].Bootstrap || commits != 0 || inline != 0 || en[0].NextCursor != 0 || sub.cursor != 0 {
			t.Fatalf("empty incremental: %+v %+v", st, en)
		}
		if len(st[0].EffectiveScopes) != 1 || st[0].EffectiveScopes[0].Key != "owner" {
			t.Fatalf("effective scopes %+v", st[0].EffectiveScopes)
		}
		// The client record holds the cursor and the subscription list.
		rec, err := s.store.GetClient(context.Background(), "empty", "c1")
		if err != nil || rec == nil || rec.Cursor != 0 || rec.ActorID != "alice" || rec.WireVersion != 3 {
			t.Fatalf("client record %+v %v", rec, err)
		}
	})
}

// A catch-up past the change limit comes in pages (SPEC §4.5: cut off at
// limitCommits changes, never splitting a commit), in order, each commit
// once, whatever the build: the page is a tenth of the log, so even the
// log shrunk under the race detector takes ten pages.
func TestPullCatchUpInPages(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		n := testenv.Scale(10000, 10)
		page := n / 10
		s := start(t, e, serverOpts{})
		r := newReplica(t, s, alice("catchup"), "c1")
		sub := r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		r.pull() // bootstrap at 0
		seedCommits(t, s.store, s.sch, "catchup", "alice", n, 500)
		// Someone else's commits are filtered out by scope.
		seedRows(t, s.store, s.sch, "catchup", "bob", "bob", 10, 10)
		r.hdr.LimitCommits = int32(page)
		seen := map[int64]bool{}
		last := int64(0)
		pulls, full := 0, 0
		for {
			resp := r.pull()
			pulls++
			_, en, commits, _ := sections(resp)
			for _, f := range resp.Msg.Frames {
				if c, ok := f.(*ssp2.Commit); ok {
					if c.CommitSeq <= last || seen[c.CommitSeq] {
						t.Fatalf("commit %d out of order after %d", c.CommitSeq, last)
					}
					seen[c.CommitSeq], last = true, c.CommitSeq
				}
			}
			if commits > page {
				t.Fatalf("page of %d commits over the change limit %d", commits, page)
			}
			if commits == page {
				full++
			}
			if commits == 0 {
				if en[0].NextCursor != int64(n)+1 {
					t.Fatalf("final cursor %d, want %d", en[0].NextCursor, n+1)
				}
				break
			}
			if pulls > n/page+5 {
				t.Fatal("catch-up does not converge")
			}
		}
		if len(seen) != n || len(r.rows["projects"]) != n || sub.cursor != int64(n)+1 {
			t.Fatalf("caught up %d commits, %d rows, cursor %d; want %d", len(seen), len(r.rows["projects"]), sub.cursor, n)
		}
		// Ten full pages of alice's commits (the last may also hold the
		// step over bob's), then the empty pull that finds the end.
		if full < 9 || pulls < 11 {
			t.Fatalf("%d pulls, %d full pages of %d: not paged", pulls, full, page)
		}
	})
}

func TestPullBootstrapPagedAndResumed(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		n := testenv.Scale(20000, 10)
		s := start(t, e, serverOpts{})
		r := newReplica(t, s, alice("boot"), "c1")
		seedRows(t, s.store, s.sch, "boot", "alice", "p", n, 1000)
		seedRows(t, s.store, s.sch, "boot", "bob", "q", 50, 50)
		sub := r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		page := int32(max(n/20, 1))
		r.hdr.LimitSnapshotRows, r.hdr.MaxSnapshotPages = page, 2
		r.pull()
		if sub.token == "" || sub.cursor <= 0 {
			t.Fatalf("first pull completed a %d-row bootstrap: cursor %d", n, sub.cursor)
		}
		pin := sub.cursor
		// Writes during the bootstrap do not move the pin.
		seedRows(t, s.store, s.sch, "boot", "alice", "z", 5, 5)
		r.pull()
		// Interruption: a response is lost before the client applied it;
		// the client resumes from its last persisted token.
		saved := *sub
		lost := r.fetch()
		if _, en, _, _ := sections(lost); !en[0].BootstrapState.Present || en[0].NextCursor != pin {
			t.Fatalf("lost response %+v", en)
		}
		*sub = saved
		pulls := 2
		for sub.token != "" {
			resp := r.pull()
			pulls++
			if _, en, _, _ := sections(resp); en[0].NextCursor != pin {
				t.Fatalf("bootstrap nextCursor %d, want the pin %d", en[0].NextCursor, pin)
			}
			if pulls > 20 {
				t.Fatal("bootstrap does not complete")
			}
		}
		if got := len(r.rows["projects"]); got < n {
			t.Fatalf("bootstrapped %d rows, want ≥ %d", got, n)
		}
		// Catch-up after the pin replays the writes made meanwhile.
		r.pull()
		if got := len(r.rows["projects"]); got != n+5 {
			t.Fatalf("after catch-up %d rows, want %d", got, n+5)
		}
		for id := range r.rows["projects"] {
			if id[0] == 'q' {
				t.Fatalf("row %s out of scope", id)
			}
		}
		// A token behind the horizon or unusable restarts silently.
		sub.token, sub.cursor = `{"asOfCommitSeq":1,"tables":["tasks"],"tableIndex":0,"rowCursor":null}`, 1
		resp := r.fetch()
		b, err := s.store.LogBounds(context.Background(), "boot")
		if err != nil {
			t.Fatal(err)
		}
		if st, en, _, inline := sections(resp); !st[0].Bootstrap || inline == 0 || en[0].NextCursor != b.MaxSeq || b.MaxSeq <= pin {
			t.Fatalf("restart %+v %+v (max %d)", st, en, b.MaxSeq)
		}
	})
}

func TestPullRevocation(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		r := newReplica(t, s, alice("rev"), "c1")
		seedRows(t, s.store, s.sch, "rev", "alice", "p", 3, 3)
		sub := r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		r.pull()
		if len(r.rows["projects"]) != 3 {
			t.Fatalf("rows %d", len(r.rows["projects"]))
		}
		cursor := sub.cursor
		// The grant shrinks: the subscription is revoked, the cursor echoed.
		r.c.scopes = `{"owner":["carol"],"project_id":["*"]}`
		resp := r.pull()
		st, en, commits, inline := sections(resp)
		if st[0].Status != ssp2.SubRevoked || st[0].ReasonCode != string(syncerr.ScopeRevoked) || len(st[0].EffectiveScopes) != 0 ||
			commits+inline != 0 || en[0].NextCursor != cursor || en[0].BootstrapState.Present {
			t.Fatalf("revoked section %+v %+v", st, en)
		}
		if len(r.rows["projects"]) != 0 {
			t.Fatal("not purged")
		}
		// A partial grant (one of two requested values) is revoked too.
		r.c.scopes = `{"owner":["alice"],"project_id":["*"]}`
		sub.scopes = map[string][]string{"owner": {"alice", "dave"}}
		resp = r.fetch()
		if st, _, _, _ := sections(resp); st[0].Status != ssp2.SubActive || len(st[0].EffectiveScopes[0].Values) != 1 {
			t.Fatalf("intersection %+v", st[0])
		}
		// A resolver grant without the variable revokes.
		r.c.scopes = `{"project_id":["*"]}`
		if st, _, _, _ := sections(r.fetch()); st[0].Status != ssp2.SubRevoked {
			t.Fatalf("missing variable %+v", st[0])
		}
	})
}

func TestPullRequestValidation(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		r := newReplica(t, s, alice("val"), "c1")
		post := func() reply { return s.post(r.c, r.request()) }
		r.subscribe("a", "projects", map[string][]string{"owner": {"alice"}})
		r.subscribe("a", "projects", map[string][]string{"owner": {"alice"}})
		s.jsonError(post(), http.StatusBadRequest, syncerr.InvalidSubscription)
		r.subs = r.subs[:1]
		r.subs[0].scopes = map[string][]string{"owner": {"*"}}
		s.jsonError(post(), http.StatusBadRequest, syncerr.InvalidSubscription)
		r.subs[0].scopes = map[string][]string{"project_id": {"x"}}
		s.jsonError(post(), http.StatusBadRequest, syncerr.InvalidSubscription)
		r.subs[0].scopes, r.subs[0].table = map[string][]string{"owner": {"alice"}}, "nope"
		s.jsonError(post(), http.StatusBadRequest, syncerr.UnknownTable)
		r.subs[0].table = "projects"
		r.hdr.Accept = ssp2.AcceptSignedURLs
		s.jsonError(post(), http.StatusBadRequest, syncerr.InvalidRequest)
	})
}

func TestPullCursorExpiredAfterPrune(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		r := newReplica(t, s, alice("prune"), "c1")
		sub := r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		r.pull()
		seedCommits(t, s.store, s.sch, "prune", "alice", 40, 40)
		r.hdr.LimitCommits = 10
		r.pull()
		if sub.cursor != 10 {
			t.Fatalf("cursor %d", sub.cursor)
		}
		ep, _, _ := s.store.LogEpoch(context.Background(), "prune")
		if _, err := s.store.PruneCommitsThrough(context.Background(), "prune", ports.PruneRequest{LogEpoch: ep, ThroughSeq: 20}); err != nil {
			t.Fatal(err)
		}
		resp := r.pull()
		st, en, commits, _ := sections(resp)
		if st[0].Status != ssp2.SubReset || st[0].ReasonCode != string(syncerr.CursorExpired) || commits != 0 || en[0].NextCursor != 10 {
			t.Fatalf("reset section %+v %+v", st, en)
		}
		// The client re-bootstraps and converges.
		r.hdr.LimitCommits = 1000
		r.pull()
		r.pull()
		if sub.cursor != 40 || sub.status != ssp2.SubActive || len(r.rows["projects"]) != 40 {
			t.Fatalf("after re-bootstrap: cursor %d status %d rows %d", sub.cursor, sub.status, len(r.rows["projects"]))
		}
	})
}

// verifyStore lets a test change the serve gate between the pull's reads
// and the read-verify.
type verifyStore struct {
	ports.Storage
	arm   func(ctx context.Context, partition string)
	armed bool
}

func (v *verifyStore) LogBounds(ctx context.Context, partition string) (ports.LogBounds, error) {
	if v.armed && v.arm != nil {
		v.armed = false
		v.arm(ctx, partition)
	}
	return v.Storage.LogBounds(ctx, partition)
}

func TestPullReadVerifyRefusal(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		vs := &verifyStore{}
		s := start(t, e, serverOpts{extra: []fx.Option{fx.Decorate(func(st ports.Storage) ports.Storage {
			vs.Storage = st
			return vs
		})}})
		r := newReplica(t, s, alice("rv"), "c1")
		r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		r.pull()
		push := ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1))

		// A restore rotates the log epoch while the pull reads: the token
		// changed, nothing of the built response is sent.
		vs.arm = func(ctx context.Context, partition string) {
			if _, err := vs.Storage.RotateLogEpoch(ctx, partition); err != nil {
				t.Error(err)
			}
		}
		vs.armed = true
		rep := s.post(r.c, r.request(push))
		body := s.jsonError(rep, http.StatusServiceUnavailable, syncerr.SchemaNotReady)
		if d, _ := body["details"].(map[string]any); d["logEpochChanged"] != true {
			t.Fatalf("details %v", body)
		}
		// The push is durable and replays as cached under the new epoch.
		if row, _ := s.store.GetRow(context.Background(), "rv", "projects", "p-1"); row == nil {
			t.Fatal("push not durable")
		}
		r.epoch = s.epoch(r.c)
		resp := r.pull(push)
		if len(resp.Results) != 1 || resp.Results[0].Status != ssp2.PushCached {
			t.Fatalf("replay %+v", resp.Results)
		}

		// A checkpoint another process declared lands during the pull.
		vs.arm = func(ctx context.Context, partition string) {
			if _, err := vs.Storage.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: partition, Name: "projection", SchemaVersion: s.sch.Version}, 1); err != nil {
				t.Error(err)
			}
		}
		vs.armed = true
		push2 := ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", project(t, s.sch, "p-2", "alice", "Two"), -1))
		before, err := s.store.GetClient(context.Background(), "rv", "c1")
		if err != nil || before == nil {
			t.Fatalf("client record %v %v", before, err)
		}
		s.jsonError(s.post(r.c, r.request(push2)), http.StatusServiceUnavailable, syncerr.SchemaNotReady)
		// The client never received the refused sections (which would
		// carry its own commit): its record, the retention watermark,
		// keeps the cursor it last received.
		if after, _ := s.store.GetClient(context.Background(), "rv", "c1"); after == nil || after.Cursor != before.Cursor ||
			string(after.Subscriptions) != string(before.Subscriptions) {
			t.Fatalf("client record moved by a refused response: %+v, was %+v", after, before)
		}
		if _, ok, _ := s.store.GetPushResult(context.Background(), "rv", "c1", "k2"); !ok {
			t.Fatal("push result not durable")
		}
	})
}

func TestPullTwoClientsConverge(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		a := newReplica(t, s, alice("conv"), "ca")
		b := newReplica(t, s, alice("conv"), "cb")
		for _, r := range []*replica{a, b} {
			r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
			r.pull()
		}
		var ops []ssp2.PushOperation
		for i := range 5 {
			id := fmt.Sprintf("a-%d", i)
			ops = append(ops, ssptest.Upsert("projects", id, project(t, s.sch, id, "alice", "from a"), -1))
		}
		a.pull(ssptest.Commit("a1", ops...))
		b.pull(ssptest.Commit("b1", ssptest.Upsert("projects", "b-0", project(t, s.sch, "b-0", "alice", "from b"), -1)))
		// b updates a's row at the version it holds; a deletes b's row.
		ver := b.rows["projects"]["a-0"].version
		b.pull(ssptest.Commit("b2", ssptest.Upsert("projects", "a-0", ssptest.Sparse(t, s.sch.Table("projects"),
			ssptest.Cols{"id": rowcodec.String("a-0"), "name": rowcodec.String("edited by b")}), ver)))
		a.pull()
		a.pull(ssptest.Commit("a2", ssptest.Delete("projects", "b-0")))
		b.pull()
		a.pull()
		if len(a.rows["projects"]) != 5 || fmt.Sprint(a.rows["projects"]) != fmt.Sprint(b.rows["projects"]) {
			t.Fatalf("diverged:\na=%v\nb=%v", a.rows["projects"], b.rows["projects"])
		}
		if a.rows["projects"]["a-0"].label != "edited by b" {
			t.Fatalf("a-0 = %+v", a.rows["projects"]["a-0"])
		}
	})
}

// §4.7, §5.1: pages too large to inline are stored once and referenced;
// every client asking for the same page gets the same segment, and the
// download re-authorizes against the caller's scopes.
func TestPullSegmentRefsSharedByClients(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		seedRows(t, s.store, s.sch, "refs", "alice", "p", 600, 600)
		var ids []string
		for i := range 20 {
			r := newReplica(t, s, alice("refs"), fmt.Sprintf("c%d", i))
			r.download = true
			r.hdr = ssp2.PullHeader{Accept: ssp2.AcceptExternalRows, LimitSnapshotRows: 500, MaxSnapshotPages: 4}
			r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
			resp := r.pull()
			var refs []*ssp2.SegmentRef
			for _, f := range resp.Msg.Frames {
				if ref, ok := f.(*ssp2.SegmentRef); ok {
					refs = append(refs, ref)
				}
			}
			if len(refs) != 2 || refs[0].RowCount != 500 || refs[0].NextRowCursor.Value != "p-000499" ||
				refs[1].RowCursor.Value != "p-000499" || refs[1].NextRowCursor.Present || len(r.rows["projects"]) != 600 {
				t.Fatalf("client %d: refs %+v rows %d", i, refs, len(r.rows["projects"]))
			}
			ids = append(ids, refs[0].SegmentID)
			if ids[i] != ids[0] {
				t.Fatalf("client %d got segment %s, client 0 %s", i, ids[i], ids[0])
			}
		}
		// Scope loss: the download is refused.
		r := newReplica(t, s, call{actor: "alice", partition: "refs", scopes: `{"owner":["bob"],"project_id":["*"]}`}, "x")
		req, _ := http.NewRequest(http.MethodGet, s.url[:len(s.url)-len("/sync")]+"/segments/"+ids[0], nil)
		req.Header.Set("X-Syncular-Scopes", `{"owner":["alice"]}`)
		req.Header.Set("X-Syncd-Actor", "alice")
		req.Header.Set("X-Syncd-Partition", "refs")
		req.Header.Set("X-Syncd-Scopes", r.c.scopes)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("download after scope loss: %d", resp.StatusCode)
		}
	})
}

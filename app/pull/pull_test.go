package pull_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/segments"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

const part = "p1"

type env struct {
	t     *testing.T
	st    *memory.Store
	segs  *memseg.Store
	sch   *schema.Schema
	svc   *pull.Service
	m     *pull.Metrics
	epoch string
	now   time.Time
}

func newEnv(t *testing.T, mut func(*pull.Options)) *env {
	t.Helper()
	return newEnvSchema(t, ssptest.Schema(t), mut)
}

func newEnvSchema(t *testing.T, sch *schema.Schema, mut func(*pull.Options)) *env {
	t.Helper()
	e := &env{t: t, st: memory.New(), segs: memseg.New(), sch: sch, now: time.UnixMilli(1_700_000_000_000)}
	ctx := context.Background()
	if err := e.st.EnsureSchema(ctx, e.sch, nil); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.epoch, err = e.st.TouchPartition(ctx, part, 1); err != nil {
		t.Fatal(err)
	}
	if e.m, err = pull.NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	o := pull.Options{Store: e.st, Segments: e.segs, Metrics: e.m, Now: func() time.Time { return e.now }}
	if mut != nil {
		mut(&o)
	}
	if e.svc, err = pull.New(o); err != nil {
		t.Fatal(err)
	}
	return e
}

// seed appends one commit of n project rows (ids prefix-000…) for owner.
func (e *env) seed(owner, prefix string, n int) int64 {
	e.t.Helper()
	ctx := context.Background()
	tbl := e.sch.Table("projects")
	var seq int64
	err := e.st.Push(ctx, part, ports.PushOptions{WriterVersion: e.sch.Version}, func(tx ports.PushTx) error {
		var changes []commit.Change
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("%s-%03d", prefix, i)
			payload := ssptest.Full(e.t, tbl, ssptest.Cols{"id": rowcodec.String(id), "owner": rowcodec.String(owner),
				"name": rowcodec.String(id), "locked": rowcodec.Bool(false)})
			sc := map[string]string{"owner": owner}
			if err := tx.UpsertRow(ctx, "projects", ports.RowWrite{RowID: id, Version: 1, Scopes: sc, Payload: payload, Values: []any{id, owner, id, false}}); err != nil {
				return err
			}
			changes = append(changes, commit.Change{Table: "projects", RowID: id, Op: commit.OpUpsert, RowVersion: 1, Scopes: sc, Row: payload})
		}
		var err error
		seq, err = tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: e.now.UnixMilli(), ActorID: "a", ClientID: "x", ClientCommitID: prefix, Changes: changes})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return seq
}

type subSpec struct {
	id, table string
	scopes    map[string][]string
	cursor    int64
	token     string
}

func sub(id string, cursor int64) subSpec {
	return subSpec{id: id, table: "projects", scopes: map[string][]string{"owner": {"alice"}}, cursor: cursor}
}

type result struct {
	msg     *ssp2.Message
	starts  []*ssp2.SubStart
	ends    []*ssp2.SubEnd
	commits [][]*ssp2.Commit
	inline  [][]*ssp2.SegmentInline
	refs    [][]*ssp2.SegmentRef
}

func (e *env) pull(h ssp2.PullHeader, allowed scopes.Allowed, subs ...subSpec) (result, error) {
	e.t.Helper()
	return e.pullAs("c1", h, allowed, subs...)
}

// pullAs pulls as client id (safe for concurrent use).
func (e *env) pullAs(client string, h ssp2.PullHeader, allowed scopes.Allowed, subs ...subSpec) (result, error) {
	r := pull.Request{Partition: part, ActorID: "alice", ClientID: client, WireVersion: 3, LogEpoch: e.epoch, Schema: e.sch, Header: &h, Scopes: scopes.Granted(allowed)}
	for _, s := range subs {
		f := &ssp2.Subscription{ID: s.id, Table: s.table, Scopes: ssp2.ScopeListsFromMap(s.scopes), Cursor: s.cursor}
		if s.token != "" {
			f.BootstrapState = ssp2.Some(s.token)
		}
		r.Subscriptions = append(r.Subscriptions, f)
	}
	if err := pull.Validate(e.sch, r.Header, r.Subscriptions); err != nil {
		return result{}, err
	}
	prev, err := e.st.GetClient(context.Background(), part, client)
	if err != nil {
		e.t.Fatal(err)
	}
	r.Previous = prev
	sp := e.svc.NewSpool()
	defer sp.Close()
	if err := e.svc.Pull(context.Background(), r, sp); err != nil {
		return result{}, err
	}
	if err := e.svc.RecordClient(context.Background(), sp); err != nil {
		e.t.Fatal(err)
	}
	body := ssp2.AppendHeader(nil, 3, ssp2.KindResponse)
	body, _ = ssp2.AppendFrame(body, ssp2.KindResponse, 3, &ssp2.RespHeader{LogEpoch: e.epoch})
	b, err := sp.Bytes()
	if err != nil {
		e.t.Fatal(err)
	}
	body = append(body, b...)
	body = append(body, 0, 0, 0, 0, 0)
	msg, err := ssp2.Decode(body)
	if err != nil {
		e.t.Fatalf("response does not decode: %v", err)
	}
	res := result{msg: msg}
	for _, f := range msg.Frames {
		switch f := f.(type) {
		case *ssp2.SubStart:
			res.starts = append(res.starts, f)
			res.commits = append(res.commits, nil)
			res.inline = append(res.inline, nil)
			res.refs = append(res.refs, nil)
		case *ssp2.SubEnd:
			res.ends = append(res.ends, f)
		case *ssp2.Commit:
			i := len(res.starts) - 1
			res.commits[i] = append(res.commits[i], f)
		case *ssp2.SegmentInline:
			i := len(res.starts) - 1
			res.inline[i] = append(res.inline[i], f)
		case *ssp2.SegmentRef:
			i := len(res.starts) - 1
			res.refs[i] = append(res.refs[i], f)
		}
	}
	return res, nil
}

var (
	inlineOnly = ssp2.PullHeader{Accept: ssp2.AcceptInlineRows}
	aliceGrant = scopes.Allowed{"owner": {"alice"}, "project_id": {"*"}}
)

func (e *env) ok(h ssp2.PullHeader, allowed scopes.Allowed, subs ...subSpec) result {
	e.t.Helper()
	r, err := e.pull(h, allowed, subs...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func wantCode(t *testing.T, err error, code syncerr.Code) {
	t.Helper()
	if syncerr.CodeOf(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

// §4.2: limits clamp silently.
func TestClamp(t *testing.T) {
	cases := []struct {
		in   ssp2.PullHeader
		want pull.Limits
	}{
		{ssp2.PullHeader{}, pull.Limits{Commits: 1000, SnapshotRows: 1000, SnapshotPages: 4}},
		{ssp2.PullHeader{LimitCommits: -5, LimitSnapshotRows: -1, MaxSnapshotPages: -9}, pull.Limits{Commits: 1, SnapshotRows: 1, SnapshotPages: 1}},
		{ssp2.PullHeader{LimitCommits: 5000, LimitSnapshotRows: 90000, MaxSnapshotPages: 51, Accept: 3}, pull.Limits{Commits: 1000, SnapshotRows: 50000, SnapshotPages: 50, Accept: 3}},
		{ssp2.PullHeader{LimitCommits: 7, LimitSnapshotRows: 8, MaxSnapshotPages: 9}, pull.Limits{Commits: 7, SnapshotRows: 8, SnapshotPages: 9}},
	}
	for _, c := range cases {
		if got := pull.Clamp(&c.in); got != c.want {
			t.Errorf("Clamp(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// §1.7, §4.1–§4.3: request-level validation.
func TestValidate(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.pull(inlineOnly, aliceGrant, sub("a", -1), sub("a", -1))
	wantCode(t, err, syncerr.InvalidSubscription)
	s := sub("a", -1)
	s.scopes = map[string][]string{"owner": {"*"}}
	_, err = e.pull(inlineOnly, aliceGrant, s)
	wantCode(t, err, syncerr.InvalidSubscription)
	s.scopes = map[string][]string{"project_id": {"p"}}
	_, err = e.pull(inlineOnly, aliceGrant, s)
	wantCode(t, err, syncerr.InvalidSubscription)
	s = sub("a", -1)
	s.table = "nope"
	_, err = e.pull(inlineOnly, aliceGrant, s)
	wantCode(t, err, syncerr.UnknownTable)
	_, err = e.pull(ssp2.PullHeader{Accept: ssp2.AcceptSignedURLs}, aliceGrant, sub("a", -1))
	wantCode(t, err, syncerr.InvalidRequest)
}

// §4.5: the cursor advances over a window with no matching change.
func TestQuietSubscriptionAdvances(t *testing.T) {
	e := newEnv(t, nil)
	e.seed("bob", "b", 3)
	e.seed("bob", "c", 3)
	r := e.ok(inlineOnly, aliceGrant, sub("s", 0))
	if r.starts[0].Status != ssp2.SubActive || r.starts[0].Bootstrap || len(r.commits[0]) != 0 || r.ends[0].NextCursor != 2 {
		t.Fatalf("quiet: %+v %+v", r.starts[0], r.ends[0])
	}
}

// §4.5: never split a commit; stop at the change limit; nextCursor is the
// last delivered commit when truncated and the window end when exhausted.
func TestIncrementalLimitsAndCursor(t *testing.T) {
	e := newEnv(t, nil)
	e.seed("alice", "a", 3) // seq 1: 3 changes
	e.seed("alice", "b", 3) // seq 2: 3 changes
	e.seed("bob", "x", 1)   // seq 3: none for alice
	e.seed("alice", "c", 2) // seq 4: 2 changes
	e.seed("bob", "y", 1)   // seq 5
	h := inlineOnly
	cases := []struct {
		limit  int32
		cursor int64
		seqs   []int64
		next   int64
	}{
		{1, 0, []int64{1}, 1},          // an oversize commit alone
		{3, 0, []int64{1}, 1},          // exactly the budget: more may follow
		{5, 0, []int64{1}, 1},          // the next commit would pass the budget
		{6, 0, []int64{1, 2}, 2},       // budget reached exactly
		{8, 0, []int64{1, 2, 4}, 5},    // everything: the window end
		{1000, 0, []int64{1, 2, 4}, 5}, // under the limit
		{2, 2, []int64{4}, 5},          // budget reached, lookahead empty: exhausted
		{3, 2, []int64{4}, 5},          // lookahead proves exhaustion
		{1000, 4, nil, 5},              // only foreign commits after the cursor
		{1000, 5, nil, 5},              // at the end
	}
	for _, c := range cases {
		h.LimitCommits = c.limit
		r := e.ok(h, aliceGrant, sub("s", c.cursor))
		var seqs []int64
		for _, f := range r.commits[0] {
			seqs = append(seqs, f.CommitSeq)
			if len(f.Tables) != 1 || f.Tables[0] != "projects" {
				t.Fatalf("dictionary %v", f.Tables)
			}
		}
		if fmt.Sprint(seqs) != fmt.Sprint(c.seqs) || r.ends[0].NextCursor != c.next {
			t.Errorf("limit %d cursor %d: commits %v next %d, want %v next %d", c.limit, c.cursor, seqs, r.ends[0].NextCursor, c.seqs, c.next)
		}
	}
}

// heldWhole answers every window as a recent log holding the whole log
// would: the pull then reads no window from the log and runs no re-check.
type heldWhole struct{ *memory.Store }

func (h heldWhole) ReadRecentWindow(partition, _ string, w ports.CommitWindow) ([]commit.Commit, bool) {
	cs, err := h.Store.ReadCommitWindow(context.Background(), partition, w)
	return cs, err == nil
}

// §4.6: a cursor behind the horizon (one below it included) is reset,
// the cursor echoed; a cursor at the horizon is served. The decision is
// the bounds', before any read: a window a recent log still holds whole
// does not serve a cursor the log was pruned past.
func TestResetBehindHorizon(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(fmt.Sprint("held window ", held), func(t *testing.T) {
			e := newEnv(t, func(o *pull.Options) {
				if held {
					o.Store = heldWhole{o.Store.(*memory.Store)}
				}
			})
			for i := range 5 {
				e.seed("alice", fmt.Sprintf("a%d", i), 1)
			}
			if _, err := e.st.PruneCommitsThrough(context.Background(), part, ports.PruneRequest{LogEpoch: e.epoch, ThroughSeq: 3}); err != nil {
				t.Fatal(err)
			}
			r := e.ok(inlineOnly, aliceGrant, sub("old", 1), sub("below", 2), sub("edge", 3), sub("new", -1))
			for i, cursor := range []int64{1, 2} {
				if r.starts[i].Status != ssp2.SubReset || r.starts[i].ReasonCode != "sync.cursor_expired" || len(r.starts[i].EffectiveScopes) != 0 ||
					r.ends[i].NextCursor != cursor || len(r.commits[i]) != 0 {
					t.Fatalf("cursor %d behind the horizon: %+v %+v", cursor, r.starts[i], r.ends[i])
				}
			}
			if r.starts[2].Status != ssp2.SubActive || len(r.commits[2]) != 2 || r.ends[2].NextCursor != 5 {
				t.Fatalf("at the horizon %+v %+v", r.starts[2], r.ends[2])
			}
			if !r.starts[3].Bootstrap || r.ends[3].NextCursor != 5 {
				t.Fatalf("bootstrap %+v", r.ends[3])
			}
		})
	}
}

// pruneDuringRead prunes while the pull reads its window.
type pruneDuringRead struct {
	*memory.Store
	epoch   string
	through int64
}

func (p *pruneDuringRead) ReadCommitWindow(ctx context.Context, name string, w ports.CommitWindow) ([]commit.Commit, error) {
	cs, err := p.Store.ReadCommitWindow(ctx, name, w)
	if _, perr := p.Store.PruneCommitsThrough(ctx, name, ports.PruneRequest{LogEpoch: p.epoch, ThroughSeq: p.through}); perr != nil {
		return nil, perr
	}
	return cs, err
}

// §4.6: the horizon is checked again after the window read, before SUB_START.
func TestHorizonRecheckAfterRead(t *testing.T) {
	var pd *pruneDuringRead
	e := newEnv(t, func(o *pull.Options) {
		pd = &pruneDuringRead{Store: o.Store.(*memory.Store), through: 3}
		o.Store = pd
	})
	pd.epoch = e.epoch
	for i := range 5 {
		e.seed("alice", fmt.Sprintf("a%d", i), 1)
	}
	r := e.ok(inlineOnly, aliceGrant, sub("s", 1))
	if r.starts[0].Status != ssp2.SubReset || len(r.commits[0]) != 0 || r.ends[0].NextCursor != 1 {
		t.Fatalf("want a reset, got %+v with %d commits", r.starts[0], len(r.commits[0]))
	}
}

// §3.2, §3.3: revocation cases.
func TestRevocation(t *testing.T) {
	e := newEnv(t, nil)
	e.seed("alice", "a", 2)
	revoked := func(r result, i int, cursor int64) {
		t.Helper()
		if r.starts[i].Status != ssp2.SubRevoked || r.starts[i].ReasonCode != "sync.scope_revoked" || len(r.starts[i].EffectiveScopes) != 0 ||
			r.starts[i].Bootstrap || len(r.commits[i])+len(r.inline[i]) != 0 || r.ends[i].NextCursor != cursor || r.ends[i].BootstrapState.Present {
			t.Fatalf("section %d: %+v %+v", i, r.starts[i], r.ends[i])
		}
	}
	// Grant lacks the variable, the value, or the resolver failed.
	revoked(e.ok(inlineOnly, scopes.Allowed{"project_id": {"*"}}, sub("s", 0)), 0, 0)
	revoked(e.ok(inlineOnly, scopes.Allowed{"owner": {"bob"}}, sub("s", -1)), 0, -1)
	r := pull.Request{Partition: part, ActorID: "alice", ClientID: "c1", WireVersion: 3, LogEpoch: e.epoch, Schema: e.sch,
		Header: &inlineOnly, Scopes: scopes.Failed(), Subscriptions: []*ssp2.Subscription{{ID: "s", Table: "projects", Scopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}}), Cursor: 7}}}
	sp := e.svc.NewSpool()
	if err := e.svc.Pull(context.Background(), r, sp); err != nil {
		t.Fatal(err)
	}
	b, _ := sp.Bytes()
	if !strings.Contains(string(b), "sync.scope_revoked") {
		t.Fatal("resolver failure not revoked")
	}
	sp.Close()
	// A wildcard grant passes the requested values through; a partial
	// intersection is active with the intersection (the other section).
	s2 := sub("t", 0)
	s2.scopes = map[string][]string{"owner": {"alice", "bob"}}
	res := e.ok(inlineOnly, scopes.Allowed{"owner": {"*"}}, sub("s", 0), s2)
	if res.starts[0].Status != ssp2.SubActive || res.starts[1].Status != ssp2.SubActive || len(res.starts[1].EffectiveScopes[0].Values) != 2 {
		t.Fatalf("wildcard %+v %+v", res.starts[0], res.starts[1])
	}
	res = e.ok(inlineOnly, scopes.Allowed{"owner": {"alice"}}, s2)
	if res.starts[0].Status != ssp2.SubActive || fmt.Sprint(res.starts[0].EffectiveScopes[0].Values) != "[alice]" || len(res.commits[0]) != 1 {
		t.Fatalf("intersection %+v", res.starts[0])
	}
}

// §4.7: paging, the pin, the token shape, resume and silent restarts.
func TestBootstrapPagingAndTokens(t *testing.T) {
	e := newEnv(t, nil)
	e.seed("alice", "a", 25)
	e.seed("bob", "b", 5)
	h := ssp2.PullHeader{Accept: ssp2.AcceptInlineRows, LimitSnapshotRows: 10, MaxSnapshotPages: 2}
	r := e.ok(h, aliceGrant, sub("s", -1))
	if !r.starts[0].Bootstrap || len(r.inline[0]) != 2 || r.ends[0].NextCursor != 2 {
		t.Fatalf("first %+v pages %d", r.ends[0], len(r.inline[0]))
	}
	tok := r.ends[0].BootstrapState.Value
	if tok != `{"asOfCommitSeq":2,"tables":["projects"],"tableIndex":0,"rowCursor":"a-019"}` {
		t.Fatalf("token %s", tok)
	}
	// A commit after the pin does not move it.
	e.seed("alice", "z", 1)
	s := sub("s", 2)
	s.token = tok
	r = e.ok(h, aliceGrant, s)
	if len(r.inline[0]) != 1 || r.ends[0].NextCursor != 2 || r.ends[0].BootstrapState.Present {
		t.Fatalf("resume %+v pages %d", r.ends[0], len(r.inline[0]))
	}
	seg, err := rowcodec.DecodeSegment(r.inline[0][0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	// The rows after a-019 in byte order: a-020…a-024 and the new z-000.
	n := 0
	for _, b := range seg.Blocks {
		n += len(b)
	}
	if n != 6 {
		t.Fatalf("last page has %d rows", n)
	}
	// Unusable tokens restart silently with a fresh pin (maxSeq = 3).
	for _, bad := range []string{
		`not json`,
		`{"asOfCommitSeq":2,"tables":["tasks"],"tableIndex":0,"rowCursor":null}`,
		`{"asOfCommitSeq":2,"tables":["projects"],"tableIndex":1,"rowCursor":null}`,
		`{"asOfCommitSeq":2,"tables":["projects"],"tableIndex":0}`,
		`{"asOfCommitSeq":2,"tables":["projects"],"tableIndex":0,"rowCursor":null,"x":1}`,
		`{"asOfCommitSeq":2.5,"tables":["projects"],"tableIndex":0,"rowCursor":null}`,
		`{"asOfCommitSeq":9,"tables":["projects"],"tableIndex":0,"rowCursor":null}`,
		`{"asOfCommitSeq":2,"tables":["projects"],"tableIndex":0,"rowCursor":""}`,
	} {
		s.token = bad
		r = e.ok(h, aliceGrant, s)
		if !r.starts[0].Bootstrap || r.ends[0].NextCursor != 3 || r.ends[0].BootstrapState.Value != `{"asOfCommitSeq":3,"tables":["projects"],"tableIndex":0,"rowCursor":"a-019"}` {
			t.Errorf("token %s: %+v", bad, r.ends[0])
		}
	}
	// A pin behind the horizon restarts too.
	if _, err := e.st.PruneCommitsThrough(context.Background(), part, ports.PruneRequest{LogEpoch: e.epoch, ThroughSeq: 3}); err != nil {
		t.Fatal(err)
	}
	s.token = tok
	r = e.ok(h, aliceGrant, s)
	if r.ends[0].NextCursor != 3 {
		t.Fatalf("behind the horizon: %+v", r.ends[0])
	}
	// A cursor from the future bootstraps.
	r = e.ok(h, aliceGrant, sub("f", 99))
	if !r.starts[0].Bootstrap {
		t.Fatal("future cursor not bootstrapped")
	}
}

// §4.2, §5.7: accept bits choose inline or referenced delivery; stored
// pages are built once and reused for the same publication key.
func TestSegmentDeliveryAndReuse(t *testing.T) {
	e := newEnv(t, func(o *pull.Options) { o.InlineMaxBytes = 300 })
	e.seed("alice", "a", 30)
	both := ssp2.PullHeader{Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows, LimitSnapshotRows: 2, MaxSnapshotPages: 1}
	r := e.ok(both, aliceGrant, sub("s", -1))
	if len(r.inline[0]) != 1 || len(r.refs[0]) != 0 {
		t.Fatal("a small page is inlined")
	}
	big := both
	big.LimitSnapshotRows = 20
	r = e.ok(big, aliceGrant, sub("s", -1))
	if len(r.refs[0]) != 1 || len(r.inline[0]) != 0 {
		t.Fatal("a large page is referenced")
	}
	ref := r.refs[0][0]
	if ref.RowCount != 20 || ref.AsOfCommitSeq != 1 || ref.RowCursor.Present || ref.NextRowCursor.Value != "a-019" ||
		ref.ScopeDigest != (scopes.Map{"owner": {"alice"}}).Digest() || ref.MediaType != ssp2.MediaRows || ref.URL.Present {
		t.Fatalf("ref %+v", ref)
	}
	// Twenty clients asking at once for a page nobody built yet: one
	// build, nineteen reuses.
	big.LimitSnapshotRows = 21
	builds := e.m.Value("syncd_pull_segment_builds_total")
	reuses := e.m.Value("syncd_pull_segment_reuses_total")
	var first sync.Once
	var id string
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.pull(big, aliceGrant, sub("s", -1))
			if err == nil && len(r.refs[0]) != 1 {
				err = errors.New("not referenced")
			}
			if err == nil {
				first.Do(func() { id = r.refs[0][0].SegmentID })
				if r.refs[0][0].SegmentID != id {
					err = errors.New("different segment")
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := e.m.Value("syncd_pull_segment_builds_total"); got != builds+1 {
		t.Fatalf("%v builds for one page", got-builds)
	}
	if got := e.m.Value("syncd_pull_segment_reuses_total"); got != reuses+19 {
		t.Fatalf("%v reuses", got-reuses)
	}
	// External only: even a tiny page is a reference; inline only: even a
	// large page is inline.
	ext := ssp2.PullHeader{Accept: ssp2.AcceptExternalRows, LimitSnapshotRows: 1, MaxSnapshotPages: 1}
	if r := e.ok(ext, aliceGrant, sub("s", -1)); len(r.refs[0]) != 1 {
		t.Fatal("external only")
	}
	in := ssp2.PullHeader{Accept: ssp2.AcceptInlineRows, LimitSnapshotRows: 50}
	if r := e.ok(in, aliceGrant, sub("s", -1)); len(r.inline[0]) != 1 {
		t.Fatal("inline only")
	}
	// A stored page small enough is inlined from the store for a client
	// that takes inline rows.
	small := both
	small.LimitSnapshotRows = 1
	if r := e.ok(small, aliceGrant, sub("s", -1)); len(r.inline[0]) != 1 {
		t.Fatal("stored small page not inlined")
	}
}

// §4.5: the client record holds the minimum active nextCursor.
func TestClientRecord(t *testing.T) {
	e := newEnv(t, nil)
	e.seed("alice", "a", 1)
	e.seed("alice", "b", 1)
	h := inlineOnly
	h.LimitCommits = 1
	e.ok(h, aliceGrant, sub("s", 0), sub("t", -1))
	rec, err := e.st.GetClient(context.Background(), part, "c1")
	if err != nil || rec == nil || rec.Cursor != 1 || rec.ActorID != "alice" || rec.WireVersion != 3 || rec.UpdatedAtMs != e.now.UnixMilli() {
		t.Fatalf("record %+v %v", rec, err)
	}
	if !strings.Contains(string(rec.Subscriptions), `"id":"s"`) || !strings.Contains(string(rec.Subscriptions), `"id":"t"`) {
		t.Fatalf("subscriptions %s", rec.Subscriptions)
	}
	// §4.1, §4.8: the list replaces the registration; an omitted
	// subscription's cursor no longer holds the watermark.
	e.now = e.now.Add(time.Second)
	e.ok(h, aliceGrant, sub("t", 2))
	rec, _ = e.st.GetClient(context.Background(), part, "c1")
	if rec.Cursor != 2 || strings.Contains(string(rec.Subscriptions), `"id":"s"`) || rec.UpdatedAtMs != e.now.UnixMilli() {
		t.Fatalf("replaced record %+v %s", rec, rec.Subscriptions)
	}
	// An unchanged record is not rewritten within the refresh interval,
	// and is past it.
	before := rec.UpdatedAtMs
	e.now = e.now.Add(time.Second)
	e.ok(h, aliceGrant, sub("t", 2))
	if rec, _ = e.st.GetClient(context.Background(), part, "c1"); rec.UpdatedAtMs != before {
		t.Fatalf("rewritten within the refresh interval: %d", rec.UpdatedAtMs)
	}
	e.now = e.now.Add(time.Minute)
	e.ok(h, aliceGrant, sub("t", 2))
	if rec, _ = e.st.GetClient(context.Background(), part, "c1"); rec.UpdatedAtMs != e.now.UnixMilli() {
		t.Fatalf("not refreshed: %d", rec.UpdatedAtMs)
	}
	// Only revoked sections: the previous cursor stays.
	e.ok(h, scopes.Allowed{"owner": {"bob"}}, sub("t", 2))
	if rec, _ = e.st.GetClient(context.Background(), part, "c1"); rec.Cursor != 2 || !strings.Contains(string(rec.Subscriptions), `"status":"revoked"`) {
		t.Fatalf("revoked-only record %+v %s", rec, rec.Subscriptions)
	}
}

// The spool spills past its memory threshold and reads back whole.
func TestSpoolSpills(t *testing.T) {
	sp := pull.NewSpool(8, t.TempDir())
	defer sp.Close()
	for i := range 10 {
		if _, err := fmt.Fprintf(sp, "%d-", i); err != nil {
			t.Fatal(err)
		}
	}
	if !sp.Spilled() || sp.Len() != 20 {
		t.Fatalf("spilled %v len %d", sp.Spilled(), sp.Len())
	}
	var b strings.Builder
	if _, err := sp.WriteTo(&b); err != nil || b.String() != "0-1-2-3-4-5-6-7-8-9-" {
		t.Fatalf("%q %v", b.String(), err)
	}
}

// A closed spool's memory serves the next response, which holds only what
// it was written: in memory, after a spill, and when the spooled bytes
// were read before Close.
func TestSpoolMemoryRecycled(t *testing.T) {
	e := newEnv(t, func(o *pull.Options) { o.SpoolMemoryBytes, o.SpoolDir = 64, t.TempDir() })
	steps := []struct {
		name  string
		write string
		spill bool
	}{
		{"first", strings.Repeat("a", 40), false},
		{"shorter after a longer", "bb", false},
		{"spilled", strings.Repeat("c", 100), true},
		{"after a spill", "dd", false},
		{"longest in memory", strings.Repeat("e", 64), false},
		{"short again", "f", false},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			sp := e.svc.NewSpool()
			if _, err := io.WriteString(sp, st.write); err != nil {
				t.Fatal(err)
			}
			b, err := sp.Bytes()
			if err != nil || string(b) != st.write || sp.Spilled() != st.spill {
				t.Fatalf("bytes %q spilled %v err %v", b, sp.Spilled(), err)
			}
			var out strings.Builder
			if _, err := sp.WriteTo(&out); err != nil || out.String() != st.write {
				t.Fatalf("wrote %q err %v", out.String(), err)
			}
			if err := sp.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := sp.Write([]byte("x")); err == nil {
				t.Fatal("a closed spool took a write")
			}
		})
	}
}

// The response budget stops further pages once exceeded.
func TestResponseBudget(t *testing.T) {
	e := newEnv(t, func(o *pull.Options) { o.ResponseBudgetBytes = 10 })
	e.seed("alice", "a", 10)
	h := ssp2.PullHeader{Accept: ssp2.AcceptInlineRows, LimitSnapshotRows: 2, MaxSnapshotPages: 5}
	r := e.ok(h, aliceGrant, sub("s", -1))
	if len(r.inline[0]) != 1 || !r.ends[0].BootstrapState.Present {
		t.Fatalf("budget: %d pages", len(r.inline[0]))
	}
}

// Inline pages are built once per key in a process, even for a storm.
func TestInlinePagesBuiltOnce(t *testing.T) {
	e := newEnv(t, nil)
	e.seed("alice", "a", 30)
	h := ssp2.PullHeader{Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows, LimitSnapshotRows: 10, MaxSnapshotPages: 3}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := e.pull(h, aliceGrant, sub("s", -1)); err != nil || len(r.inline[0]) != 3 {
				t.Errorf("pull: %v", err)
			}
		}()
	}
	wg.Wait()
	if b, r := e.m.Value("syncd_pull_segment_builds_total"), e.m.Value("syncd_pull_segment_reuses_total"); b != 3 || r != 27 {
		t.Fatalf("%v builds, %v reuses", b, r)
	}
	// Without the cache every client builds.
	e2 := newEnv(t, func(o *pull.Options) { o.InlineCacheBytes = -1 })
	e2.seed("alice", "a", 30)
	e2.ok(h, aliceGrant, sub("s", -1))
	e2.ok(h, aliceGrant, sub("s", -1))
	if b := e2.m.Value("syncd_pull_segment_builds_total"); b != 6 {
		t.Fatalf("%v builds without the cache", b)
	}
}

// gatedFind holds the first Find that misses until released, so another
// request can build and store the page between that lookup and its join.
type gatedFind struct {
	segments.Publisher
	fired   atomic.Bool
	missed  chan struct{}
	release chan struct{}
}

func (g *gatedFind) Find(ctx context.Context, k ports.SegmentKey, nowMs int64) (ports.SegmentPublication, bool, error) {
	pub, ok, err := g.Publisher.Find(ctx, k, nowMs)
	if !ok && err == nil && !g.fired.Swap(true) {
		close(g.missed)
		<-g.release
	}
	return pub, ok, err
}

// A request whose lookup missed just before another request built and
// stored (or cached) the page, and which joins after that builder left,
// reuses the page instead of building it again.
func TestPageBuiltOnceAfterLateJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows int32
	}{{"stored", 20}, {"inline", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gatedFind{missed: make(chan struct{}), release: make(chan struct{})}
			e := newEnv(t, func(o *pull.Options) {
				o.InlineMaxBytes = 300
				g.Publisher = o.Segments
				o.Segments = g
			})
			e.seed("alice", "a", 30)
			h := ssp2.PullHeader{Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows, LimitSnapshotRows: tc.rows, MaxSnapshotPages: 1}
			late := make(chan result, 1)
			go func() {
				r, err := e.pull(h, aliceGrant, sub("s", -1))
				if err != nil {
					t.Error(err)
				}
				late <- r
			}()
			<-g.missed
			first := e.ok(h, aliceGrant, sub("s", -1))
			close(g.release)
			second := <-late
			if b, r := e.m.Value("syncd_pull_segment_builds_total"), e.m.Value("syncd_pull_segment_reuses_total"); b != 1 || r != 1 {
				t.Fatalf("%v builds, %v reuses", b, r)
			}
			page := func(r result) string {
				if len(r.refs[0]) == 1 && len(r.inline[0]) == 0 {
					return "ref " + r.refs[0][0].SegmentID
				}
				if len(r.inline[0]) == 1 && len(r.refs[0]) == 0 {
					return "inline " + contentaddr.Of(r.inline[0][0].Payload)
				}
				return "none"
			}
			if p1, p2 := page(first), page(second); p1 != p2 || !strings.HasPrefix(p1, map[int32]string{20: "ref ", 2: "inline "}[tc.rows]) {
				t.Fatalf("pages %s and %s", p1, p2)
			}
		})
	}
}

// Pull only prepares the client record; RecordClient writes it, once.
func TestClientRecordWrittenOnRecord(t *testing.T) {
	e := newEnv(t, nil)
	e.seed("alice", "a", 1)
	r := pull.Request{Partition: part, ActorID: "alice", ClientID: "c9", WireVersion: 3, LogEpoch: e.epoch, Schema: e.sch,
		Header: &inlineOnly, Scopes: scopes.Granted(aliceGrant), Subscriptions: []*ssp2.Subscription{{ID: "s", Table: "projects", Scopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}}), Cursor: 0}}}
	sp := e.svc.NewSpool()
	defer sp.Close()
	ctx := context.Background()
	if err := e.svc.Pull(ctx, r, sp); err != nil {
		t.Fatal(err)
	}
	if rec, err := e.st.GetClient(ctx, part, "c9"); err != nil || rec != nil {
		t.Fatalf("written before RecordClient: %+v %v", rec, err)
	}
	if err := e.svc.RecordClient(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if rec, err := e.st.GetClient(ctx, part, "c9"); err != nil || rec == nil || rec.Cursor != 1 {
		t.Fatalf("record %+v %v", rec, err)
	}
	if err := e.svc.RecordClient(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// heldLog answers windows as a recent log holding the whole log would (at
// epoch only), and reads the log as pruneDuringRead does: either way a
// prune passes the cursor meanwhile. It counts the horizon re-checks.
type heldLog struct {
	pruneDuringRead
	rechecks int
}

func (h *heldLog) ReadRecentWindow(partition, epoch string, w ports.CommitWindow) ([]commit.Commit, bool) {
	if epoch != h.epoch {
		return nil, false
	}
	cs, err := h.pruneDuringRead.ReadCommitWindow(context.Background(), partition, w)
	return cs, err == nil
}

func (h *heldLog) ReadBoundsAndGate(ctx context.Context, partition string, running int32) (ports.LogBounds, checkpoint.ServeGate, bool, error) {
	h.rechecks++
	return h.Store.ReadBoundsAndGate(ctx, partition, running)
}

// A window held whole in memory is complete whatever a prune deletes
// meanwhile: the section stays active with every commit, no horizon
// re-check runs, and the gate read with the bounds stands for the
// read-verify. A window read from the log keeps §4.6's re-check.
func TestHeldWindowNeedsNoRecheck(t *testing.T) {
	tests := []struct {
		name         string
		epoch        string // the request's
		wantStatus   ssp2.SubStatus
		wantCommits  int
		wantRechecks int
		wantVerified bool
		wantSource   string
	}{
		{"held in memory", "", ssp2.SubActive, 4, 0, true, "memory"},
		{"another epoch reads the log", "other", ssp2.SubReset, 0, 1, true, "log"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h *heldLog
			e := newEnv(t, func(o *pull.Options) {
				h = &heldLog{pruneDuringRead: pruneDuringRead{Store: o.Store.(*memory.Store), through: 3}}
				o.Store = h
			})
			h.epoch = e.epoch
			for i := range 5 {
				e.seed("alice", fmt.Sprintf("a%d", i), 1)
			}
			ctx := context.Background()
			bounds, gate, _, err := h.Store.ReadBoundsAndGate(ctx, part, e.sch.Version)
			if err != nil {
				t.Fatal(err)
			}
			epoch := tc.epoch
			if epoch == "" {
				epoch = e.epoch
			}
			hdr := inlineOnly
			r := pull.Request{Partition: part, ActorID: "alice", ClientID: "c1", WireVersion: 3, LogEpoch: epoch, Schema: e.sch,
				Header: &hdr, Scopes: scopes.Granted(aliceGrant), Bounds: &bounds, Gate: &gate,
				Subscriptions: []*ssp2.Subscription{{ID: "s", Table: "projects", Scopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}}), Cursor: 1}}}
			sp := e.svc.NewSpool()
			defer sp.Close()
			if err := e.svc.Pull(ctx, r, sp); err != nil {
				t.Fatal(err)
			}
			served := sp.Served()
			status := ssp2.SubActive
			if served.Reset == 1 {
				status = ssp2.SubReset
			}
			_, verified := sp.VerifiedGate()
			if status != tc.wantStatus || served.Commits != tc.wantCommits || h.rechecks != tc.wantRechecks || verified != tc.wantVerified {
				t.Fatalf("status %v, %d commits, %d rechecks, verified %v; want %v, %d, %d, %v",
					status, served.Commits, h.rechecks, verified, tc.wantStatus, tc.wantCommits, tc.wantRechecks, tc.wantVerified)
			}
			if e.m.Windows(tc.wantSource) != 1 {
				t.Fatalf("windows from %s: %v", tc.wantSource, e.m.Windows(tc.wantSource))
			}
		})
	}
}

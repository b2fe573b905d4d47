package round_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	pullsvc "github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// windowEnv is a round serving the window [3, 2] of ssptest.Window, with
// a pull service, over a memory store at version 3.
type windowEnv struct {
	*roundtest.Env
	w      *schema.Window
	v2, v3 *schema.Schema
}

func newWindowEnv(t testing.TB, mut func(*round.Options)) *windowEnv {
	t.Helper()
	w := ssptest.Window(t)
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	if err := st.EnsureSchema(context.Background(), w.Current(), nil); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	p, err := pullsvc.New(pullsvc.Options{Store: st, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e := &roundtest.Env{T: t, Schema: w.Current(), Store: st, ID: ports.Identity{ActorID: "alice", Partition: "p1"}}
	ro := round.Options{Resolver: roundtest.AllowAll, Pull: p, Window: func() *schema.Window { return w }}
	if mut != nil {
		mut(&ro)
	}
	e.Round, e.Push = roundtest.Assemble(t, w.Current(), roundtest.Options{Store: st, Now: now, Round: ro})
	if e.Epoch, err = st.TouchPartition(context.Background(), "p1", 1); err != nil {
		t.Fatal(err)
	}
	return &windowEnv{Env: e, w: w, v2: w.View(2).Schema(), v3: w.Current()}
}

// at is a request of client at schema version v.
func (e *windowEnv) at(client string, v int32, commits ...*ssp2.PushCommit) ssptest.Req {
	r := e.Req(commits...)
	r.ClientID, r.SchemaVersion = client, v
	return r
}

// task is a tasks payload of version s's table from c.
func (e *windowEnv) task(s *schema.Schema, c ssptest.Cols) []byte {
	return ssptest.Sparse(e.T, s.Table("tasks"), c)
}

func (e *windowEnv) stored(id string) []rowcodec.Value {
	e.T.Helper()
	row, err := e.Store.GetRow(context.Background(), "p1", "tasks", id)
	if err != nil || row == nil {
		e.T.Fatalf("row %s: %+v, %v", id, row, err)
	}
	vals, err := rowcodec.New(e.v3.Table("tasks")).DecodeRow(row.Payload, nil)
	if err != nil {
		e.T.Fatalf("stored row %s is not in the current layout: %v", id, err)
	}
	return vals
}

// pull serves a pull of client at version v with one tasks (or table)
// subscription and returns the decoded response.
func (e *windowEnv) pull(client string, v int32, table string, cursor int64) (*ssp2.Message, error) {
	e.T.Helper()
	m := &ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{
		&ssp2.ReqHeader{ClientID: client, SchemaVersion: v, LogEpoch: ssp2.Some(e.Epoch)},
		&ssp2.PullHeader{LimitCommits: 100, LimitSnapshotRows: 100, MaxSnapshotPages: 1, Accept: ssp2.AcceptInlineRows},
		&ssp2.Subscription{ID: "s1", Table: table, Scopes: ssp2.ScopeListsFromMap(map[string][]string{"project_id": {"pr-1"}}), Cursor: cursor},
	}}
	body, err := ssp2.Encode(m)
	if err != nil {
		e.T.Fatal(err)
	}
	resp, err := e.Round.Handle(context.Background(), e.ID, body)
	if err != nil {
		return nil, err
	}
	defer resp.Release()
	var buf bytes.Buffer
	if err := resp.Encode(&buf); err != nil {
		e.T.Fatal(err)
	}
	out, err := ssp2.Decode(buf.Bytes())
	if err != nil {
		e.T.Fatal(err)
	}
	return out, nil
}

func TestWindowFloorNamesTheOldestServedVersion(t *testing.T) {
	e := newWindowEnv(t, nil)
	for _, v := range []int32{1, 4} {
		resp, _ := e.Must(e.at("c1", v, ssptest.Commit("k1", ssptest.Delete("tasks", "a"))))
		h := resp.Header
		if len(resp.Msg.Frames) != 1 || h.RequiredSchemaVersion != ssp2.Some(int32(2)) || h.LatestSchemaVersion != ssp2.Some(int32(3)) {
			t.Fatalf("version %d: floor %+v", v, h)
		}
	}
	for _, v := range []int32{2, 3} {
		resp, _ := e.Must(e.at("c1", v, ssptest.Commit("k"+string(rune('0'+v)), ssptest.Delete("tasks", "a"))))
		if h := resp.Header; h.RequiredSchemaVersion.Present || h.LatestSchemaVersion != ssp2.Some(int32(3)) || len(resp.Results) != 1 {
			t.Fatalf("version %d served: %+v", v, resp.Msg.Frames)
		}
	}
}

// An older client's pushes decode with its codec: its insert leaves the
// appended column NULL, its update leaves it as a newer client wrote it,
// its conflict rows come in its shape, and a table it does not know is
// unknown to it.
func TestWindowOlderClientPushes(t *testing.T) {
	e := newWindowEnv(t, nil)
	v2Task := ssptest.Cols{"id": rowcodec.String("t-1"), "project_id": rowcodec.String("pr-1"), "title": rowcodec.String("one"),
		"done": rowcodec.Bool(false), "estimate": rowcodec.Null(), "attachment": rowcodec.Null()}
	resp, _ := e.Must(e.at("old", 2, ssptest.Commit("o1", ssptest.Upsert("tasks", "t-1", e.task(e.v2, v2Task), -1))))
	roundtest.WantApplied(t, resp.Results[0])
	if vals := e.stored("t-1"); !vals[6].IsNull() || vals[2].Text() != "one" {
		t.Fatalf("inserted row %v", vals)
	}

	// A current client writes the appended column; the old one edits the
	// title and leaves it alone.
	resp, _ = e.Must(e.at("new", 3, ssptest.Commit("n1", ssptest.Upsert("tasks", "t-1",
		e.task(e.v3, ssptest.Cols{"id": rowcodec.String("t-1"), "priority": rowcodec.Int(5)}), -1))))
	roundtest.WantApplied(t, resp.Results[0])
	resp, _ = e.Must(e.at("old", 2, ssptest.Commit("o2", ssptest.Upsert("tasks", "t-1",
		e.task(e.v2, ssptest.Cols{"id": rowcodec.String("t-1"), "title": rowcodec.String("uno")}), -1))))
	roundtest.WantApplied(t, resp.Results[0])
	if vals := e.stored("t-1"); vals[6].Int() != 5 || vals[2].Text() != "uno" {
		t.Fatalf("updated row %v", vals)
	}

	// A stale write conflicts; the server row is the old client's shape.
	resp, _ = e.Must(e.at("old", 2, ssptest.Commit("o3", ssptest.Upsert("tasks", "t-1",
		e.task(e.v2, ssptest.Cols{"id": rowcodec.String("t-1"), "title": rowcodec.String("late")}), 1))))
	r := resp.Results[0]
	if r.Status != ssp2.PushRejected || len(r.Results) != 1 || r.Results[0].Status != ssp2.OpConflict {
		t.Fatalf("want a conflict, got %+v", r)
	}
	vals, err := rowcodec.New(e.v2.Table("tasks")).DecodeRow(r.Results[0].ServerRow, nil)
	if err != nil || vals[2].Text() != "uno" {
		t.Fatalf("server row in the old shape: %v %v", vals, err)
	}
	if cc := r.Results[0].ConflictColumns; len(cc) != 1 || cc[0]&^0x3f != 0 || cc[0]&(1<<2) == 0 {
		t.Fatalf("conflict columns %08b", cc)
	}

	// labels is version 3's.
	label := ssptest.Sparse(t, e.v3.Table("labels"), ssptest.Cols{"id": rowcodec.String("l-1"), "project_id": rowcodec.String("pr-1"), "name": rowcodec.Null()})
	resp, _ = e.Must(e.at("old", 2, ssptest.Commit("o4", ssptest.Upsert("labels", "l-1", label, -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, "sync.unknown_table")
	resp, _ = e.Must(e.at("new", 3, ssptest.Commit("n2", ssptest.Upsert("labels", "l-1", label, -1))))
	roundtest.WantApplied(t, resp.Results[0])
}

// An older client pulls rows, pages and commits in its shape, stamped
// with its version, and is recorded with it; a table it does not know
// is unknown to it.
func TestWindowOlderClientPulls(t *testing.T) {
	e := newWindowEnv(t, nil)
	resp, _ := e.Must(e.at("new", 3, ssptest.Commit("n1", ssptest.Upsert("tasks", "t-1", e.task(e.v3, ssptest.Cols{
		"id": rowcodec.String("t-1"), "project_id": rowcodec.String("pr-1"), "title": rowcodec.String("one"), "done": rowcodec.Bool(false),
		"estimate": rowcodec.Null(), "attachment": rowcodec.Null(), "priority": rowcodec.Int(9)}), -1))))
	roundtest.WantApplied(t, resp.Results[0])
	old := rowcodec.New(e.v2.Table("tasks"))

	msg, err := e.pull("old", 2, "tasks", -1)
	if err != nil {
		t.Fatal(err)
	}
	var seg *ssp2.SegmentInline
	var end *ssp2.SubEnd
	for _, f := range msg.Frames {
		switch f := f.(type) {
		case *ssp2.SegmentInline:
			seg = f
		case *ssp2.SubEnd:
			end = f
		}
	}
	if seg == nil || end == nil {
		t.Fatalf("bootstrap frames %+v", msg.Frames)
	}
	s, err := rowcodec.DecodeSegment(seg.Payload)
	if err != nil || s.SchemaVersion != 2 || len(s.Columns) != 6 || len(s.Blocks) != 1 || len(s.Blocks[0]) != 1 {
		t.Fatalf("segment %+v, %v", s, err)
	}

	resp, _ = e.Must(e.at("new", 3, ssptest.Commit("n2", ssptest.Upsert("tasks", "t-1", e.task(e.v3, ssptest.Cols{
		"id": rowcodec.String("t-1"), "title": rowcodec.String("two")}), -1))))
	roundtest.WantApplied(t, resp.Results[0])
	if msg, err = e.pull("old", 2, "tasks", end.NextCursor); err != nil {
		t.Fatal(err)
	}
	var commits []*ssp2.Commit
	for _, f := range msg.Frames {
		if c, ok := f.(*ssp2.Commit); ok {
			commits = append(commits, c)
		}
	}
	if len(commits) != 1 || len(commits[0].Changes) != 1 {
		t.Fatalf("incremental frames %+v", msg.Frames)
	}
	vals, err := old.DecodeRow(commits[0].Changes[0].Row, nil)
	if err != nil || vals[2].Text() != "two" {
		t.Fatalf("commit row in the old shape: %v %v", vals, err)
	}
	rec, err := e.Store.GetClient(context.Background(), "p1", "old")
	if err != nil || rec == nil {
		t.Fatalf("client record %v %v", rec, err)
	}
	var subs []struct{ SchemaVersion int32 }
	if err := json.Unmarshal(rec.Subscriptions, &subs); err != nil || len(subs) != 1 || subs[0].SchemaVersion != 2 {
		t.Fatalf("recorded subscriptions %s", rec.Subscriptions)
	}

	if _, err := e.pull("old", 2, "labels", -1); syncerr.CodeOf(err) != syncerr.UnknownTable {
		t.Fatalf("a subscription to a table of a newer version: %v", err)
	}
	if _, err := e.pull("new", 3, "labels", -1); err != nil {
		t.Fatal(err)
	}
}

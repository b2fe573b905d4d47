package testcontrol

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/adapters/testcontrolhttp"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
)

const tasksSchema = `{"version": 1, "tables": [{"name": "tasks", "primaryKey": "id",
  "columns": [{"name": "id", "type": "string", "nullable": false},
              {"name": "project_id", "type": "string", "nullable": false},
              {"name": "title", "type": "string", "nullable": false},
              {"name": "done", "type": "boolean", "nullable": true}],
  "scopes": [{"pattern": "project:{project_id}"}]}]}`

// plane is a test-control listener over a fresh Manager.
type plane struct {
	t   *testing.T
	m   *Manager
	srv *httptest.Server
}

// engines are where the plane keeps instance databases: SQLite files,
// and PostgreSQL schemas when a test database is configured (pgtest skips
// that engine loudly without one, or fails under SYNCD_REQUIRE_POSTGRES=1).
var engines = []struct {
	name     string
	database func(t *testing.T) string
}{
	{"sqlite", func(*testing.T) string { return "" }},
	{"postgres", func(t *testing.T) string { return pgtest.BaseURL(t) }},
}

// eachEngine runs f as one subtest per engine, with the plane options
// selecting it.
func eachEngine(t *testing.T, f func(t *testing.T, o Options)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { f(t, Options{Database: e.database(t)}) })
	}
}

// with is o with the bounds of b.
func (o Options) with(b Options) Options {
	o.MaxInstances, o.MaxBytes = b.MaxInstances, b.MaxBytes
	return o
}

// newPlaneWith is a test-control listener over a fresh, started Manager
// with the options of o.
func newPlaneWith(t *testing.T, o Options) *plane {
	t.Helper()
	p := &plane{t: t}
	o.Dir, o.BaseURL = t.TempDir(), func() string { return p.srv.URL }
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.m = m
	p.srv = httptest.NewServer(testcontrolhttp.New(p.m, nil))
	t.Cleanup(func() {
		p.srv.Close()
		if err := p.m.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// schemas lists the PostgreSQL schemas the plane holds (nil on SQLite).
func (p *plane) schemas() []string {
	p.t.Helper()
	e, ok := p.m.eng.(*postgresEngine)
	if !ok {
		return nil
	}
	names, err := e.set.Schemas(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	return names
}

func (p *plane) do(method, path string, body any, hdr map[string]string) (int, []byte) {
	p.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			p.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, p.srv.URL+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	// The control POSTs carry JSON, declared as a harness declares it.
	if rd != nil && strings.HasPrefix(path, "/control/") {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.StatusCode, out
}

func (p *plane) create(extra string) string {
	p.t.Helper()
	code, b := p.do("POST", "/control/instances", `{"schema": `+tasksSchema+`, "partition": "part-1", "nowMs": 1000000`+extra+`}`, nil)
	var r struct{ ID string }
	if code != http.StatusOK || json.Unmarshal(b, &r) != nil || r.ID == "" {
		p.t.Fatalf("create: %d %s", code, b)
	}
	return r.ID
}

// call runs a control method and decodes its result into out (may be nil).
func (p *plane) call(id, method string, out any, args ...any) {
	p.t.Helper()
	if args == nil {
		args = []any{}
	}
	code, b := p.do("POST", "/control/instances/"+id+"/call", map[string]any{"method": method, "args": args}, nil)
	if code != http.StatusOK {
		p.t.Fatalf("%s: %d %s", method, code, b)
	}
	var r struct{ Result json.RawMessage }
	if err := json.Unmarshal(b, &r); err != nil {
		p.t.Fatalf("%s: %s", method, b)
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			p.t.Fatalf("%s result %s: %v", method, r.Result, err)
		}
	}
}

// upsert is a commit writing task rowID in project.
func (p *plane) upsert(id, rowID, project string, done bool) *ssp2.PushCommit {
	p.t.Helper()
	inst, _ := p.m.get(id)
	payload, err := rowcodec.New(inst.spec.schema.Table("tasks")).AppendSparse(nil, []rowcodec.Value{
		rowcodec.String(rowID), rowcodec.String(project), rowcodec.String("title " + rowID), rowcodec.Bool(done)})
	if err != nil {
		p.t.Fatal(err)
	}
	return &ssp2.PushCommit{ClientCommitID: "c-" + rowID, Operations: []ssp2.PushOperation{
		{Op: ssp2.OpUpsert, Table: "tasks", RowID: rowID, Payload: payload}}}
}

// push upserts tasks (id, project) for actor, one request per commit.
func (p *plane) push(id, actor, clientID string, rows ...[2]string) {
	p.t.Helper()
	for i, r := range rows {
		resp := p.sync(id, actor, &ssp2.ReqHeader{ClientID: clientID, SchemaVersion: 1}, p.upsert(id, r[0], r[1], i%2 == 0))
		if st := pushStatus(resp); st != ssp2.PushApplied {
			p.t.Fatalf("push %s: status %v in %+v", r[0], st, resp.Frames)
		}
	}
}

// sync posts one wire-3 request to the instance's /sync route, with the
// partition's log epoch (a first contact registers the partition).
func (p *plane) sync(id, actor string, frames ...ssp2.Frame) *ssp2.Message {
	p.t.Helper()
	h := frames[0].(*ssp2.ReqHeader)
	if !h.LogEpoch.Present {
		first := p.post(id, actor, &ssp2.ReqHeader{ClientID: h.ClientID, SchemaVersion: h.SchemaVersion},
			&ssp2.PullHeader{LimitCommits: 1, LimitSnapshotRows: 1, MaxSnapshotPages: 1, Accept: ssp2.AcceptInlineRows})
		h.LogEpoch = ssp2.Some(first.Frames[0].(*ssp2.RespHeader).LogEpoch)
	}
	return p.post(id, actor, frames...)
}

func (p *plane) post(id, actor string, frames ...ssp2.Frame) *ssp2.Message {
	p.t.Helper()
	body, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: frames})
	if err != nil {
		p.t.Fatal(err)
	}
	code, b := p.do("POST", "/i/"+id+"/sync", body, map[string]string{"x-actor": actor, "Content-Type": "application/vnd.syncular.sync.v2"})
	if code != http.StatusOK {
		p.t.Fatalf("sync: %d %s", code, b)
	}
	m, err := ssp2.Decode(b)
	if err != nil {
		p.t.Fatal(err)
	}
	return m
}

// pushStatus is the status of the response's only push result (255: none).
func pushStatus(m *ssp2.Message) ssp2.PushStatus {
	for _, f := range m.Frames {
		if pr, ok := f.(*ssp2.PushResult); ok {
			return pr.Status
		}
	}
	return 255
}

func TestCreateCallClose(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		code, b := p.do("GET", "/control/capabilities", nil, nil)
		if code != http.StatusOK || !strings.Contains(string(b), `"wireVersions":[1,2,3]`) || !strings.Contains(string(b), `"blobs","blob-presign"`) ||
			!strings.Contains(string(b), `"crdt"`) {
			t.Fatalf("capabilities: %d %s", code, b)
		}
		id := p.create("")
		inst, _ := p.m.get(id)
		if _, pg := inst.db.(*postgresDB); pg && len(p.schemas()) != 1 {
			t.Fatalf("schemas of one instance: %v", p.schemas())
		}

		// An actor never granted holds nothing: its write is forbidden.
		resp := p.sync(id, "alice", &ssp2.ReqHeader{ClientID: "c0", SchemaVersion: 1}, p.upsert(id, "t0", "p1", false))
		if st := pushStatus(resp); st != ssp2.PushRejected {
			t.Fatalf("a write by an actor without a grant: status %v in %+v", st, resp.Frames)
		}

		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		p.push(id, "alice", "c1", [2]string{"t2", "p1"}, [2]string{"t1", "p1"})
		var seq int64
		p.call(id, "getMaxCommitSeq", &seq)
		if seq != 2 {
			t.Fatalf("max commit seq %d, want 2", seq)
		}
		var rows []rowState
		p.call(id, "readRows", &rows, "tasks")
		if len(rows) != 2 || rows[0].RowID != "t1" || rows[1].RowID != "t2" || rows[0].Version != 1 ||
			rows[0].Values["done"] != false || rows[1].Values["done"] != true || rows[0].Values["title"] != "title t1" ||
			rows[0].Scopes["project_id"] != "p1" {
			t.Fatalf("readRows: %+v", rows)
		}

		// Closing deletes the instance database; closing again is fine.
		if code, b := p.do("DELETE", "/control/instances/"+id, nil, nil); code != http.StatusOK {
			t.Fatalf("close: %d %s", code, b)
		}
		if _, err := os.Stat(inst.dir); !os.IsNotExist(err) {
			t.Fatalf("instance directory survived close: %v", err)
		}
		if left := p.schemas(); len(left) != 0 {
			t.Fatalf("schemas survived close: %v", left)
		}
		if code, _ := p.do("DELETE", "/control/instances/"+id, nil, nil); code != http.StatusOK {
			t.Fatalf("second close: %d", code)
		}
		if code, b := p.do("POST", "/i/"+id+"/sync", "x", map[string]string{"x-actor": "alice"}); code != http.StatusNotFound || !strings.Contains(string(b), "sync.not_found") {
			t.Fatalf("closed instance answered: %d %s", code, b)
		}
	})
}

func TestUnsupportedCreateOptions(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		tests := []struct{ extra, want string }{
			{`, "limits": {"maxBlobBytes": 10}`, "limits.maxBlobBytes"},
			{`, "leases": {"ttlMs": 1000, "grace": 5}`, "leases.grace"},
			{`, "signedUrls": {"ttlSeconds": 5, "audience": "x"}`, "signedUrls.audience"},
			{`, "blobStore": {}`, "blobStore"},
		}
		for _, tt := range tests {
			t.Run(tt.want, func(t *testing.T) {
				code, b := p.do("POST", "/control/instances", `{"schema": `+tasksSchema+`, "partition": "p", "nowMs": 1`+tt.extra+`}`, nil)
				var r struct{ Unsupported string }
				if code != http.StatusUnprocessableEntity || json.Unmarshal(b, &r) != nil || r.Unsupported != tt.want {
					t.Fatalf("got %d %s, want 422 unsupported %s", code, b, tt.want)
				}
			})
		}
		if n := p.m.Len(); n != 0 {
			t.Fatalf("%d instances left by refused creates", n)
		}
	})
}

func TestUnknownMethodAndInstance(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create("")
		code, b := p.do("POST", "/control/instances/"+id+"/call", `{"method": "noSuchMethod", "args": []}`, nil)
		if code != http.StatusNotImplemented || strings.TrimSpace(string(b)) != `{"unsupported":"noSuchMethod"}` {
			t.Fatalf("unknown method: %d %s", code, b)
		}
		code, b = p.do("POST", "/control/instances/"+id+"/call", `{"method": "advanceClock", "args": [-5]}`, nil)
		if code != http.StatusInternalServerError || !strings.Contains(string(b), `"error"`) {
			t.Fatalf("host error: %d %s", code, b)
		}
		if code, _ := p.do("POST", "/control/instances/nope/call", `{"method": "nowMs", "args": []}`, nil); code != http.StatusNotFound {
			t.Fatalf("unknown instance: %d", code)
		}
	})
}

// The retention active window and the age force run on the virtual
// clock: nothing moves until advanceClock does.
func TestVirtualClockMovesRetention(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create("")
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"*"}})
		p.push(id, "alice", "writer", [2]string{"a", "p1"}, [2]string{"b", "p1"}, [2]string{"c", "p1"})
		inst, _ := p.m.get(id)
		var now int64
		p.call(id, "nowMs", &now)
		if now != 1000000 {
			t.Fatalf("nowMs %d, want the create nowMs", now)
		}
		// A reader seen now, at cursor 1, holds the horizon while it is active.
		if err := inst.live.store.PutClient(context.Background(), ports.ClientRecord{Partition: "part-1", ClientID: "reader",
			ActorID: "alice", WireVersion: 3, Cursor: 1, Subscriptions: []byte("[]"), UpdatedAtMs: now}); err != nil {
			t.Fatal(err)
		}
		policy := map[string]int64{"activeWindowMs": 60_000, "ageForceMs": 3_600_000, "minRetainedCommits": 0}
		steps := []struct {
			advance int64
			horizon int64
		}{
			{0, 1},      // the active reader pins the horizon at its cursor
			{60_000, 1}, // still inside the window (seen exactly 60 s ago)
			{1, 3},      // out of the window: no floor, everything may go
		}
		for _, s := range steps {
			p.call(id, "advanceClock", nil, s.advance)
			var h int64
			p.call(id, "prune", &h, policy)
			if h != s.horizon {
				t.Fatalf("after advancing %d ms: horizon %d, want %d", s.advance, h, s.horizon)
			}
			var got int64
			p.call(id, "getHorizonSeq", &got)
			if got != h {
				t.Fatalf("getHorizonSeq %d, prune answered %d", got, h)
			}
		}
	})
}

// A segment expires when the virtual clock passes its TTL, judged at the
// download: no timer sweeps it.
func TestVirtualClockMovesSegmentExpiry(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create(`, "limits": {"inlineSegmentMaxBytes": 0, "segmentTtlMs": 5000}`)
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		p.push(id, "alice", "writer", [2]string{"a", "p1"})
		resp := p.sync(id, "alice", &ssp2.ReqHeader{ClientID: "reader", SchemaVersion: 1},
			&ssp2.PullHeader{LimitCommits: 100, LimitSnapshotRows: 100, MaxSnapshotPages: 1,
				Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows},
			&ssp2.Subscription{ID: "s1", Table: "tasks", Cursor: -1,
				Scopes: ssp2.ScopeListsFromMap(map[string][]string{"project_id": {"p1"}})})
		var ref *ssp2.SegmentRef
		for _, f := range resp.Frames {
			if r, ok := f.(*ssp2.SegmentRef); ok {
				ref = r
			}
			if _, ok := f.(*ssp2.SegmentInline); ok {
				t.Fatal("inlineSegmentMaxBytes 0 inlined a page")
			}
		}
		if ref == nil {
			t.Fatalf("no SEGMENT_REF in %+v", resp.Frames)
		}
		hdr := map[string]string{"x-actor": "alice", "X-Syncular-Scopes": `{"project_id":["p1"]}`}
		steps := []struct {
			advance int64
			status  int
			code    string
		}{
			{0, http.StatusOK, ""},
			{4_999, http.StatusOK, ""},
			{1, http.StatusNotFound, "sync.segment_expired"},
		}
		for _, s := range steps {
			p.call(id, "advanceClock", nil, s.advance)
			code, b := p.do("GET", "/i/"+id+"/segments/"+ref.SegmentID, nil, hdr)
			if code != s.status || (s.code != "" && !strings.Contains(string(b), s.code)) {
				t.Fatalf("after advancing %d ms: %d %s, want %d %s", s.advance, code, b, s.status, s.code)
			}
		}
	})
}

// TestIdempotencyFault: failNextIdempotencyLookup makes the next lookup
// unreadable whether or not a record exists (a new commit as much as a
// replay): the commit is answered with the retryable
// sync.idempotency_cache_miss, nothing applies, and the identical retry
// goes through.
func TestIdempotencyFault(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create("")
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		for _, tc := range []struct {
			name, clientID string
			bindFirst      bool
		}{
			{"a new commit of a client never seen", "fresh", false},
			{"a new commit of a bound client", "bound", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.bindFirst {
					p.push(id, "alice", tc.clientID, [2]string{"b-" + tc.clientID, "p1"})
				}
				var before int64
				p.call(id, "getMaxCommitSeq", &before)
				p.call(id, "failNextIdempotencyLookup", nil)
				commit := p.upsert(id, "t-"+tc.clientID, "p1", false)
				resp := p.sync(id, "alice", &ssp2.ReqHeader{ClientID: tc.clientID, SchemaVersion: 1}, commit)
				var res *ssp2.PushResult
				for _, f := range resp.Frames {
					if pr, ok := f.(*ssp2.PushResult); ok {
						res = pr
					}
				}
				if res == nil || res.Status != ssp2.PushRejected || len(res.Results) != 1 ||
					res.Results[0].Code != "sync.idempotency_cache_miss" || !res.Results[0].Retryable {
					t.Fatalf("under the fault: %+v, want a retryable sync.idempotency_cache_miss", res)
				}
				var after int64
				p.call(id, "getMaxCommitSeq", &after)
				if after != before {
					t.Fatalf("the commit applied under the fault: max seq %d → %d", before, after)
				}
				resp = p.sync(id, "alice", &ssp2.ReqHeader{ClientID: tc.clientID, SchemaVersion: 1}, commit)
				if st := pushStatus(resp); st != ssp2.PushApplied {
					t.Fatalf("the identical retry: status %v in %+v", st, resp.Frames)
				}
			})
		}
		// A replay of a stored result under the fault is the cache miss too.
		p.call(id, "failNextIdempotencyLookup", nil)
		resp := p.sync(id, "alice", &ssp2.ReqHeader{ClientID: "bound", SchemaVersion: 1}, p.upsert(id, "t-bound", "p1", false))
		if st := pushStatus(resp); st != ssp2.PushRejected {
			t.Fatalf("a replay under the fault: status %v in %+v", st, resp.Frames)
		}
	})
}

// captureBackup snapshots the instance database and restoreBackup brings
// it back, as often as asked: the rows and the log of the snapshot, a
// new epoch restored-<nowMs>, and the instance serving writes after it.
func TestBackupRestore(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create("")
		if code, b := p.do("POST", "/control/instances/"+id+"/call", `{"method": "restoreBackup", "args": []}`, nil); code != http.StatusInternalServerError ||
			!strings.Contains(string(b), "captureBackup must run before restoreBackup") {
			t.Fatalf("restore before a capture: %d %s", code, b)
		}
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		p.push(id, "alice", "writer", [2]string{"a", "p1"}, [2]string{"b", "p1"})
		p.call(id, "captureBackup", nil)
		inst, _ := p.m.get(id)
		if _, pg := inst.db.(*postgresDB); pg && len(p.schemas()) != 2 {
			t.Fatalf("schemas with a capture: %v, want the live one and the capture", p.schemas())
		}
		p.push(id, "alice", "writer", [2]string{"c", "p1"})
		epoch := func() string {
			m := p.post(id, "alice", &ssp2.ReqHeader{ClientID: "reader", SchemaVersion: 1},
				&ssp2.PullHeader{LimitCommits: 1, LimitSnapshotRows: 1, MaxSnapshotPages: 1, Accept: ssp2.AcceptInlineRows})
			return m.Frames[0].(*ssp2.RespHeader).LogEpoch
		}
		before := epoch()
		check := func(when string, ids ...string) {
			t.Helper()
			var rows []rowState
			p.call(id, "readRows", &rows, "tasks")
			var got []string
			for _, r := range rows {
				got = append(got, r.RowID)
			}
			var seq int64
			p.call(id, "getMaxCommitSeq", &seq)
			if strings.Join(got, ",") != strings.Join(ids, ",") || seq != int64(len(ids)) {
				t.Fatalf("%s: rows %v and max seq %d, want %v", when, got, seq, ids)
			}
		}
		check("before the restore", "a", "b", "c")
		for i, advance := range []int64{1000, 2500} {
			p.call(id, "advanceClock", nil, advance)
			var now int64
			p.call(id, "nowMs", &now)
			p.call(id, "restoreBackup", nil)
			check(fmt.Sprintf("after restore %d", i+1), "a", "b")
			if e := epoch(); e != fmt.Sprintf("restored-%d", now) || e == before {
				t.Fatalf("epoch after restore %d: %q (before: %q), want restored-%d", i+1, e, before, now)
			}
			p.push(id, "alice", "writer2", [2]string{"d", "p1"})
			check(fmt.Sprintf("a write after restore %d", i+1), "a", "b", "d")
		}
		if code, b := p.do("DELETE", "/control/instances/"+id, nil, nil); code != http.StatusOK {
			t.Fatalf("close: %d %s", code, b)
		}
		if left := p.schemas(); len(left) != 0 {
			t.Fatalf("schemas survived close: %v", left)
		}
	})
}

package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// fakeServer answers /sync with scripted responses and serves segments.
type fakeServer struct {
	t        testing.TB
	sch      *schema.Schema
	mu       sync.Mutex
	requests []*ssp2.Message
	script   []func(req *ssp2.Message) ([]ssp2.Frame, int)
	segments map[string][]byte
	segHdrs  []http.Header
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/api/segments/") {
		f.segHdrs = append(f.segHdrs, r.Header.Clone())
		b, ok := f.segments[strings.TrimPrefix(r.URL.Path, "/api/segments/")]
		if !ok {
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"code":"sync.not_found","message":"segment not found"}`))
			return
		}
		_, _ = w.Write(b)
		return
	}
	body, _ := io.ReadAll(r.Body)
	m, err := ssp2.Decode(body)
	if err != nil {
		f.t.Errorf("request does not decode: %v", err)
		return
	}
	f.requests = append(f.requests, m)
	if r.Header.Get("X-Actor") != "alice" {
		f.t.Errorf("sync request without host headers")
	}
	step := f.script[0]
	f.script = f.script[1:]
	frames, status := step(m)
	if status != 0 {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"code":"sync.schema_not_ready","message":"not ready","retryable":true}`))
		return
	}
	out, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse, Frames: frames})
	if err != nil {
		f.t.Errorf("encode response: %v", err)
		return
	}
	w.Header().Set("Content-Type", client.ContentType)
	_, _ = w.Write(out)
}

func segment(t *testing.T, tbl *schema.Table, ids ...string) []byte {
	t.Helper()
	var rows []rowcodec.Row
	for _, id := range ids {
		rows = append(rows, rowcodec.Row{ServerVersion: 3, Values: []rowcodec.Value{
			rowcodec.String(id), rowcodec.String("alice"), rowcodec.String("name " + id), rowcodec.Bool(false)}})
	}
	b, err := rowcodec.EncodeSegment(&rowcodec.Segment{SegmentHeader: rowcodec.SegmentHeader{Table: tbl.Name, SchemaVersion: 2, Columns: tbl.Columns}, Blocks: [][]rowcodec.Row{rows}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClientAgainstScriptedServer(t *testing.T) {
	sch := ssptest.Schema(t)
	tbl := sch.Table("projects")
	inline := segment(t, tbl, "a", "b")
	ref := segment(t, tbl, "c")
	bad := segment(t, tbl, "d")
	f := &fakeServer{t: t, sch: sch, segments: map[string][]byte{contentaddr.Of(ref): ref, contentaddr.Of(bad): []byte("not the bytes")}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	hdr := http.Header{}
	hdr.Set("X-Actor", "alice")
	c, err := client.New(client.Options{BaseURL: srv.URL + "/api", Schema: sch, ClientID: "c1", Header: hdr,
		Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows | ssp2.AcceptSignedURLs})
	if err != nil {
		t.Fatal(err)
	}
	c.Subscribe("s", "projects", map[string][]string{"owner": {"alice"}})
	c.QueueWithID("k1", c.Delete("projects", "x", 1))
	active := &ssp2.SubStart{ID: "s", Status: ssp2.SubActive, EffectiveScopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}}), Bootstrap: true}
	refFrame := func(b []byte, url string) *ssp2.SegmentRef {
		r := &ssp2.SegmentRef{SegmentID: contentaddr.Of(b), MediaType: ssp2.MediaRows, Table: "projects", ByteLength: int64(len(b)),
			RowCount: 1, AsOfCommitSeq: 9, ScopeDigest: "d", RowCursor: ssp2.Some("b")}
		if url != "" {
			r.URL, r.URLExpiresAtMs = ssp2.Some(url), ssp2.Some(int64(1)<<50)
		}
		return r
	}
	f.script = []func(*ssp2.Message) ([]ssp2.Frame, int){
		// Epoch acquisition: no epoch, no commits.
		func(m *ssp2.Message) ([]ssp2.Frame, int) {
			if h := m.Frames[0].(*ssp2.ReqHeader); h.LogEpoch.Present || len(m.Frames) != 2 {
				t.Errorf("acquisition request %+v", m.Frames)
			}
			return []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1", ResetRequired: true}}, 0
		},
		// Push + pull: a bootstrap in one inline and one signed page.
		func(m *ssp2.Message) ([]ssp2.Frame, int) {
			h := m.Frames[0].(*ssp2.ReqHeader)
			pc, ok := m.Frames[1].(*ssp2.PushCommit)
			sub, ok2 := m.Frames[3].(*ssp2.Subscription)
			if h.LogEpoch.Value != "e1" || !ok || pc.ClientCommitID != "k1" || !ok2 || sub.Cursor != -1 {
				t.Errorf("sync request %+v", m.Frames)
			}
			return []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"},
				&ssp2.PushResult{ClientCommitID: "k1", Status: ssp2.PushApplied, CommitSeq: 9, Results: []ssp2.OpResult{{Status: ssp2.OpApplied}}},
				active, &ssp2.SegmentInline{Payload: inline}, refFrame(ref, srv.URL+"/api/segments/"+contentaddr.Of(ref)+"?st=tok"),
				&ssp2.SubEnd{NextCursor: 9}}, 0
		},
		// Incremental: a commit, then a failed segment download in a resumed bootstrap.
		func(m *ssp2.Message) ([]ssp2.Frame, int) {
			if sub := m.Frames[2].(*ssp2.Subscription); sub.Cursor != 9 || sub.BootstrapState.Present {
				t.Errorf("second pull subscription %+v", sub)
			}
			row, _ := rowcodec.New(tbl).AppendRow(nil, []rowcodec.Value{rowcodec.String("e"), rowcodec.String("alice"), rowcodec.String("e"), rowcodec.Bool(true)})
			return []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"},
				&ssp2.SubStart{ID: "s", Status: ssp2.SubActive, EffectiveScopes: active.EffectiveScopes},
				&ssp2.Commit{CommitSeq: 10, Tables: []string{"projects"}, Changes: []ssp2.Change{
					{Op: ssp2.OpUpsert, RowID: "e", RowVersion: 1, Row: row, Scopes: ssp2.StoredScopesFromMap(map[string]string{"owner": "alice"})},
					{Op: ssp2.OpDelete, RowID: "a", Scopes: ssp2.StoredScopesFromMap(map[string]string{"owner": "alice"})}}},
				&ssp2.SubEnd{NextCursor: 10}}, 0
		},
		func(m *ssp2.Message) ([]ssp2.Frame, int) {
			return []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"}, active, refFrame(bad, ""), &ssp2.SubEnd{NextCursor: 11}}, 0
		},
		func(m *ssp2.Message) ([]ssp2.Frame, int) { return nil, 503 },
		// Revocation purges.
		func(m *ssp2.Message) ([]ssp2.Frame, int) {
			return []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"},
				&ssp2.SubStart{ID: "s", Status: ssp2.SubRevoked, ReasonCode: "sync.scope_revoked", EffectiveScopes: ssp2.ScopeLists{}},
				&ssp2.SubEnd{NextCursor: 10}}, 0
		},
	}
	ctx := context.Background()
	res, err := c.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.LogEpoch() != "e1" || len(c.Pending()) != 0 || len(res.Pushes) != 1 {
		t.Fatalf("epoch %q pending %v pushes %d", c.LogEpoch(), c.Pending(), len(res.Pushes))
	}
	if got := strings.Join(c.RowIDs("projects"), ","); got != "a,b,c" {
		t.Fatalf("rows after bootstrap: %s", got)
	}
	if _, v, _ := c.Get("projects", "c"); v != 3 {
		t.Fatalf("segment row version %d", v)
	}
	if h := f.segHdrs[0]; h.Get("X-Actor") != "" || h.Get("X-Syncular-Scopes") != "" {
		t.Fatalf("signed-url fetch carried credentials: %v", h)
	}
	if st := c.Stats(); st.SignedDownloads != 1 || st.InlineSegments != 1 || st.BootstrapRows != 3 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := c.Pull(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.RowIDs("projects"), ","); got != "b,c,e" || c.Subscription("s").Cursor != 10 {
		t.Fatalf("rows after commit: %s cursor %d", got, c.Subscription("s").Cursor)
	}
	res, err = c.Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var se *client.SegmentError
	if sec := res.Sections["s"]; !errors.As(sec.Err, &se) || c.Subscription("s").Cursor != 10 {
		t.Fatalf("tampered segment: %v, cursor %d", sec.Err, c.Subscription("s").Cursor)
	}
	if got := strings.Join(c.RowIDs("projects"), ","); got != "b,c,e" {
		t.Fatalf("a failed section applied rows: %s", got)
	}
	if h := f.segHdrs[1]; h.Get("X-Actor") != "alice" || h.Get("X-Syncular-Scopes") != `{"owner":["alice"]}` {
		t.Fatalf("direct download headers %v", h)
	}
	_, err = c.Pull(ctx)
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Status != 503 || client.CodeOf(err) != "sync.schema_not_ready" || !he.Retryable {
		t.Fatalf("503: %v", err)
	}
	if _, err := c.Pull(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c.RowIDs("projects")) != 0 || c.Subscription("s").Status != ssp2.SubRevoked {
		t.Fatalf("revocation kept rows %v", c.RowIDs("projects"))
	}
}

// TestResetKeepsEffectiveForEviction: a reset echoes an empty effective
// map; the persisted effective scopes stay those of the last active
// section (§3.3), so a later unsubscription evicts the rows they match,
// and a revocation purges only those rows, not what was only requested.
func TestResetKeepsEffectiveForEviction(t *testing.T) {
	sch := ssptest.Schema(t)
	tbl := sch.Table("projects")
	page := segment(t, tbl, "a", "b")
	f := &fakeServer{t: t, sch: sch}
	srv := httptest.NewServer(f)
	defer srv.Close()
	hdr := http.Header{}
	hdr.Set("X-Actor", "alice")
	c, err := client.New(client.Options{BaseURL: srv.URL + "/api", Schema: sch, ClientID: "c1", Header: hdr,
		Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows})
	if err != nil {
		t.Fatal(err)
	}
	alice := ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}})
	c.SetLogEpoch("e1")
	c.Subscribe("s", "projects", map[string][]string{"owner": {"alice", "bob"}})
	f.script = []func(*ssp2.Message) ([]ssp2.Frame, int){
		func(*ssp2.Message) ([]ssp2.Frame, int) {
			return []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"}, &ssp2.SubStart{ID: "s", Status: ssp2.SubActive, EffectiveScopes: alice, Bootstrap: true},
				&ssp2.SegmentInline{Payload: page}, &ssp2.SubEnd{NextCursor: 4}}, 0
		},
		func(*ssp2.Message) ([]ssp2.Frame, int) {
			return []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"},
				&ssp2.SubStart{ID: "s", Status: ssp2.SubReset, ReasonCode: "sync.cursor_expired", EffectiveScopes: ssp2.ScopeLists{}},
				&ssp2.SubEnd{NextCursor: 4}}, 0
		},
	}
	ctx := context.Background()
	for range 2 {
		if _, err := c.Pull(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s := c.Subscription("s")
	if s.Status != ssp2.SubReset || s.Cursor != -1 || len(c.RowIDs("projects")) != 2 {
		t.Fatalf("after the reset: status %v cursor %d rows %v (a reset keeps rows)", s.Status, s.Cursor, c.RowIDs("projects"))
	}
	if got := s.Effective["owner"]; len(got) != 1 || got[0] != "alice" {
		t.Fatalf("effective after the reset %v, want the last active echo", s.Effective)
	}
	if n := c.UnsubscribeAndEvict("s"); n != 2 || len(c.RowIDs("projects")) != 0 || c.Subscription("s") != nil {
		t.Fatalf("evicted %d, left %v", n, c.RowIDs("projects"))
	}
	// Never active: nothing to evict, whatever was requested.
	c.Subscribe("t", "projects", map[string][]string{"owner": {"alice"}})
	if n := c.UnsubscribeAndEvict("t"); n != 0 {
		t.Fatalf("evicted %d rows of a subscription never active", n)
	}
}

package testcontrol

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// The plane keeps at most MaxInstances open: one more create is refused
// with sync.rate_limited (429) until an instance is closed.
func TestInstanceCountIsCapped(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o.with(Options{MaxInstances: 2, MaxBytes: 2 * MinInstanceBytes}))
		first := p.create("")
		p.create("")
		body := `{"schema": ` + tasksSchema + `, "partition": "p", "nowMs": 1}`
		for range 3 {
			code, b := p.do("POST", "/control/instances", body, nil)
			var r struct{ Error, Code, ID string }
			if code != http.StatusTooManyRequests || json.Unmarshal(b, &r) != nil || r.Code != "sync.rate_limited" ||
				!strings.Contains(r.Error, "--test-control-max-instances") || r.ID != "" {
				t.Fatalf("create past the cap: %d %s, want 429 sync.rate_limited naming the flag", code, b)
			}
		}
		if n := p.m.Len(); n != 2 {
			t.Fatalf("%d instances open, want 2", n)
		}
		if code, b := p.do("DELETE", "/control/instances/"+first, nil, nil); code != http.StatusOK {
			t.Fatalf("close: %d %s", code, b)
		}
		p.create("") // the closed instance's place is free again
	})
}

// Each instance gets an equal part of MaxBytes, half for its database,
// half for its blobs and segments, so MaxInstances of them never hold
// more than MaxBytes; New refuses bounds leaving an instance too little.
func TestInstanceCapsShareMaxBytes(t *testing.T) {
	tests := []struct {
		instances int
		bytes     int64
		ok        bool
	}{
		{0, 0, true}, // the defaults
		{64, 1 << 30, true},
		{1, MinInstanceBytes, true},
		{3, 10 << 20, true}, // not a multiple: the remainder is unused
		{2, MinInstanceBytes, false},
		{-1, 1 << 30, false},
		{1, -1, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d instances %d bytes", tt.instances, tt.bytes), func(t *testing.T) {
			m, err := New(Options{MaxInstances: tt.instances, MaxBytes: tt.bytes})
			if !tt.ok {
				if err == nil {
					t.Fatalf("accepted, caps %+v", m.caps)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sum := int64(m.o.MaxInstances) * (m.caps.dbBytes + m.caps.memBytes); sum > m.o.MaxBytes ||
				m.caps.dbBytes < sqlitePageBytes || m.caps.dbBytes%sqlitePageBytes != 0 {
				t.Fatalf("%d instances capped at %+v hold up to %d bytes, past %d", m.o.MaxInstances, m.caps, sum, m.o.MaxBytes)
			}
		})
	}
}

// A push past the instance's database cap is refused with a clear
// request-level error (507, sync.invalid_request naming the cap), never a
// 500; what was applied before stays, and nothing of the refused commit.
func TestInstanceDatabaseIsCapped(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o.with(Options{MaxInstances: 1, MaxBytes: MinInstanceBytes}))
		id := p.create("")
		inst, _ := p.m.get(id)
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		// Random text: PostgreSQL would compress a repeated one to nothing.
		title := randomText(t, 60_000)
		applied := 0
		for i := 0; ; i++ {
			if i == 100 {
				t.Fatalf("100 pushes of %d bytes fit a database capped at %d bytes", len(title), inst.caps.dbBytes)
			}
			code, b := p.syncRaw(id, "alice", &ssp2.ReqHeader{ClientID: "c1", SchemaVersion: 1}, p.task(id, fmt.Sprintf("r%03d", i), "p1", title))
			if code == http.StatusOK {
				applied++
				continue
			}
			var e struct{ Code, Message string }
			if code != http.StatusInsufficientStorage || json.Unmarshal(b, &e) != nil || e.Code != "sync.invalid_request" ||
				!strings.Contains(e.Message, "database is full") || !strings.Contains(e.Message, "--test-control-max-bytes") {
				t.Fatalf("push %d past the cap: %d %s, want 507 sync.invalid_request naming the cap", i, code, b)
			}
			break
		}
		if applied == 0 {
			t.Fatal("not one push fit")
		}
		var rows []rowState
		p.call(id, "readRows", &rows, "tasks")
		var seq int64
		p.call(id, "getMaxCommitSeq", &seq)
		if len(rows) != applied || seq != int64(applied) {
			t.Fatalf("%d pushes applied, but %d rows and commit seq %d stored", applied, len(rows), seq)
		}
		switch db := inst.db.(type) {
		case *sqliteDB: // SQLite refuses the write past the cap itself
			var pages int64
			if err := inst.live.store.ReadDB().QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(db.path)
			if err != nil {
				t.Fatal(err)
			}
			if pages*sqlitePageBytes > inst.caps.dbBytes || st.Size() > inst.caps.dbBytes {
				t.Fatalf("database of %d pages, file of %d bytes, past the cap of %d bytes", pages, st.Size(), inst.caps.dbBytes)
			}
		case *postgresDB: // the plane refuses pushes once the schema passed it: at most one push more
			size, err := db.set.Size(t.Context(), db.name)
			if err != nil {
				t.Fatal(err)
			}
			// The title is stored thrice: its column, the row payload and the change.
			if grown, most := size-db.baseline, inst.caps.dbBytes+4*int64(len(title)); grown > most || grown < inst.caps.dbBytes {
				t.Fatalf("schema grown %d bytes past its empty layout, want the cap %d and at most one push more (%d)", grown, inst.caps.dbBytes, most)
			}
		default:
			t.Fatalf("database %T", db)
		}
	})
}

// Blob uploads count against the instance's in-memory cap: past it an
// upload is blob.too_large naming the cap; a blob stored already is
// still accepted (the upload is idempotent).
func TestInstanceBlobsAreCapped(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o.with(Options{MaxInstances: 1, MaxBytes: MinInstanceBytes}))
		id := p.createSchema(attachmentsSchema, "")
		inst, _ := p.m.get(id)
		upload := func(data string) blobResult {
			var r blobResult
			p.call(id, "uploadBlob", &r, "author", contentaddr.Of([]byte(data)), b64arg(data), "application/octet-stream")
			return r
		}
		var first string
		stored := int64(0)
		for i := 0; ; i++ {
			if i == 100 {
				t.Fatalf("100 blobs of 100 kB fit a cap of %d bytes", inst.caps.memBytes)
			}
			data := fmt.Sprintf("%06d", i) + strings.Repeat("b", 100_000)
			r := upload(data)
			if r.OK {
				stored += int64(len(data))
				if first == "" {
					first = data
				}
				continue
			}
			if r.code() != "blob.too_large" || !strings.Contains(r.Error.Message, "--test-control-max-bytes") {
				t.Fatalf("upload past the cap: %+v", r)
			}
			break
		}
		if stored == 0 || stored > inst.caps.memBytes {
			t.Fatalf("%d blob bytes stored under a cap of %d", stored, inst.caps.memBytes)
		}
		if r := upload(first); !r.OK {
			t.Fatalf("upload of a stored blob at the cap: %+v", r)
		}
	})
}

// Uploads under way hold their place: concurrent uploads to one instance
// together never pass its cap.
func TestConcurrentBlobUploadsShareTheCap(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o.with(Options{MaxInstances: 1, MaxBytes: MinInstanceBytes}))
		id := p.createSchema(attachmentsSchema, "")
		inst, _ := p.m.get(id)
		const uploaders, each, size = 8, 8, 60_000
		var wg sync.WaitGroup
		var stored atomic.Int64
		errs := make(chan error, uploaders)
		for u := range uploaders {
			wg.Go(func() {
				for i := range each {
					data := []byte(fmt.Sprintf("%02d/%02d", u, i) + strings.Repeat("c", size))
					req, err := http.NewRequest("PUT", p.srv.URL+"/i/"+id+"/blobs/"+contentaddr.Of(data), bytes.NewReader(data))
					if err != nil {
						errs <- err
						return
					}
					req.Header.Set("X-Actor", "author")
					req.Header.Set("Content-Type", "application/octet-stream")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						errs <- err
						return
					}
					_ = resp.Body.Close()
					switch resp.StatusCode {
					case http.StatusOK:
						stored.Add(int64(len(data)))
					case http.StatusRequestEntityTooLarge:
					default:
						errs <- fmt.Errorf("upload: %d", resp.StatusCode)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n := stored.Load(); n == 0 || n > inst.caps.memBytes {
			t.Fatalf("%d bytes stored by concurrent uploads under a cap of %d", n, inst.caps.memBytes)
		}
	})
}

// Segments count against the same cap: a pull whose new segment would
// pass it fails with the clear 507. Nothing sweeps segments on a timer,
// so at the cap the publications expired at virtual now are swept first,
// and the pull that could not fit before fits once they expired.
func TestInstanceSegmentsAreCapped(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o.with(Options{MaxInstances: 1, MaxBytes: MinInstanceBytes}))
		id := p.create(`, "limits": {"inlineSegmentMaxBytes": 0, "segmentTtlMs": 5000}`)
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"*"}})
		inst, _ := p.m.get(id)
		for _, r := range [][2]string{{"p1", strings.Repeat("z", 4000)}, {"p2", "small"}} {
			if code, b := p.syncRaw(id, "alice", &ssp2.ReqHeader{ClientID: "writer", SchemaVersion: 1}, p.task(id, r[0]+"-row", r[0], r[1])); code != http.StatusOK {
				t.Fatalf("push: %d %s", code, b)
			}
		}
		bootstrap := func(project string) (int, []byte) {
			return p.syncRaw(id, "alice", &ssp2.ReqHeader{ClientID: "reader-" + project, SchemaVersion: 1},
				&ssp2.PullHeader{LimitCommits: 100, LimitSnapshotRows: 100, MaxSnapshotPages: 1,
					Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows},
				&ssp2.Subscription{ID: "s1", Table: "tasks", Cursor: -1,
					Scopes: ssp2.ScopeListsFromMap(map[string][]string{"project_id": {project}})})
		}
		if code, b := bootstrap("p1"); code != http.StatusOK {
			t.Fatalf("bootstrap of p1: %d %s", code, b)
		}
		// Fill the rest of the cap with blobs, down to a few bytes.
		n := 0
		for _, size := range []int{64 << 10, 8 << 10, 1 << 10, 128, 16} {
			for range 100 {
				n++
				data := fmt.Sprintf("%06d", n) + strings.Repeat("f", size)
				var r blobResult
				p.call(id, "uploadBlob", &r, "alice", contentaddr.Of([]byte(data)), b64arg(data))
				if !r.OK {
					break
				}
			}
		}
		code, b := bootstrap("p2")
		if code != http.StatusInsufficientStorage || !strings.Contains(string(b), "blob and segment store is full") {
			t.Fatalf("bootstrap past the cap: %d %s, want 507", code, b)
		}
		p.call(id, "advanceClock", nil, 5000) // p1's segment expires
		if code, b := bootstrap("p2"); code != http.StatusOK {
			t.Fatalf("bootstrap once the older segment expired: %d %s", code, b)
		}
		st, err := inst.segs.SegmentStats(t.Context(), inst.clock.NowMs())
		if err != nil {
			t.Fatal(err)
		}
		if st.Segments != 1 || st.ExpiredPublications != 0 {
			t.Fatalf("segments after the sweep: %+v, want p2's only", st)
		}
	})
}

// task is a commit writing task rowID of project with title.
func (p *plane) task(id, rowID, project, title string) *ssp2.PushCommit {
	p.t.Helper()
	inst, _ := p.m.get(id)
	payload, err := rowcodec.New(inst.spec.schema.Table("tasks")).AppendSparse(nil, []rowcodec.Value{
		rowcodec.String(rowID), rowcodec.String(project), rowcodec.String(title), rowcodec.Bool(true)})
	if err != nil {
		p.t.Fatal(err)
	}
	return &ssp2.PushCommit{ClientCommitID: "c-" + rowID, Operations: []ssp2.PushOperation{
		{Op: ssp2.OpUpsert, Table: "tasks", RowID: rowID, Payload: payload}}}
}

// createSchema creates an instance of schema (a driver schema) with the
// extra create options.
func (p *plane) createSchema(schema, extra string) string {
	p.t.Helper()
	code, b := p.do("POST", "/control/instances", `{"schema": `+schema+`, "partition": "part-1", "nowMs": 1000000`+extra+`}`, nil)
	var r struct{ ID string }
	if code != http.StatusOK || json.Unmarshal(b, &r) != nil || r.ID == "" {
		p.t.Fatalf("create: %d %s", code, b)
	}
	return r.ID
}

// syncRaw posts one wire-3 request as sync does and returns the status
// and body, whatever they are.
func (p *plane) syncRaw(id, actor string, frames ...ssp2.Frame) (int, []byte) {
	p.t.Helper()
	h := frames[0].(*ssp2.ReqHeader)
	first := p.post(id, actor, &ssp2.ReqHeader{ClientID: h.ClientID, SchemaVersion: h.SchemaVersion},
		&ssp2.PullHeader{LimitCommits: 1, LimitSnapshotRows: 1, MaxSnapshotPages: 1, Accept: ssp2.AcceptInlineRows})
	h.LogEpoch = ssp2.Some(first.Frames[0].(*ssp2.RespHeader).LogEpoch)
	body, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: frames})
	if err != nil {
		p.t.Fatal(err)
	}
	return p.do("POST", "/i/"+id+"/sync", body, map[string]string{"x-actor": actor, "Content-Type": "application/vnd.syncular.sync.v2"})
}

// randomText is n bytes of random hex: text no engine compresses.
func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}

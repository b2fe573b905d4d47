package e2e

import (
	"bytes"
	"database/sql"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/testenv"
)

var rowsLane = ssp2.AcceptInlineRows | ssp2.AcceptExternalRows

// laneClient is a Go client of partition proj for alice, with every
// project and note id granted.
func laneClient(t *testing.T, s *server, id string, o client.Options) *client.Client {
	t.Helper()
	h := http.Header{}
	h.Set("X-Syncd-Actor", "alice")
	h.Set("X-Syncd-Partition", "proj")
	h.Set("X-Syncd-Scopes", `{"owner":["alice"],"project_id":["*"],"id":["*"]}`)
	o.BaseURL, o.Schema, o.ClientID, o.Header = strings.TrimSuffix(s.url, "/sync"), s.sch, id, h
	c, err := client.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var noteIDs = []string{"n1", "n2", "n3", "n4"}

// pushNotes writes notes rows holding every column type through the
// server, then edits one of them (server version 2).
func pushNotes(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := t.Context()
	rows := []map[string]rowcodec.Value{
		{"id": rowcodec.String("n1"), "title": rowcodec.String("naïve 🚀"), "body": rowcodec.String(""), "count": rowcodec.Int(-7),
			"score": rowcodec.Float(2.5), "done": rowcodec.Bool(true), "meta": rowcodec.JSON(`{ "a": [1, 2] }`),
			"blob": rowcodec.Bytes([]byte{0, 1, 255}), "doc": rowcodec.Null()},
		{"id": rowcodec.String("n2"), "title": rowcodec.Null(), "body": rowcodec.String("b"), "count": rowcodec.Null(),
			"score": rowcodec.Float(math.Inf(-1)), "done": rowcodec.Bool(false), "meta": rowcodec.Null(), "blob": rowcodec.Bytes([]byte{}), "doc": rowcodec.Null()},
		{"id": rowcodec.String("n3"), "title": rowcodec.String("t"), "body": rowcodec.String("x"), "count": rowcodec.Int(1<<53 - 1),
			"score": rowcodec.Float(-1e-300), "done": rowcodec.Bool(false), "meta": rowcodec.JSON("null"), "blob": rowcodec.Null(), "doc": rowcodec.Null()},
		{"id": rowcodec.String("n4"), "title": rowcodec.String("four"), "body": rowcodec.String("y"), "count": rowcodec.Int(0),
			"score": rowcodec.Float(1e308), "done": rowcodec.Bool(true), "meta": rowcodec.JSON(`"s"`), "blob": rowcodec.Null(), "doc": rowcodec.Null()},
	}
	for _, r := range rows {
		op, err := c.Upsert("notes", r["id"].Text(), r, -1)
		if err != nil {
			t.Fatal(err)
		}
		c.Queue(op)
	}
	edit, err := c.Upsert("notes", "n3", map[string]rowcodec.Value{"id": rowcodec.String("n3"), "title": rowcodec.String("edited")}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Push(ctx); err != nil {
		t.Fatal(err)
	}
	c.Queue(edit)
	res, err := c.Push(ctx)
	if err != nil || len(res.Pushes) != 1 || res.Pushes[0].Status != ssp2.PushApplied {
		t.Fatalf("edit: %+v %v", res, err)
	}
}

func subscribeAll(c *client.Client) {
	c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
	c.Subscribe("notes", "notes", map[string][]string{"id": noteIDs})
}

// The image lane end to end on both engines: the Go client imports whole
// tables as sqlite images, in one bootstrap round, and holds exactly the
// rows and versions the rows lane gives another client; the served image
// is a SQLite file holding the §5.3 metadata.
func TestImageLaneMatchesRowsLane(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		n := testenv.Scale(30_000, 30) // the 30,000-row bootstrap: three rounds on either lane
		seedRows(t, s.store, s.sch, "proj", "alice", "s", n, 5000)
		seedRows(t, s.store, s.sch, "proj", "bob", "b", 200, 200)
		pushNotes(t, laneClient(t, s, "writer", client.Options{}))

		img := laneClient(t, s, "img", client.Options{LimitSnapshotRows: 3})
		rows := laneClient(t, s, "rows", client.Options{Accept: rowsLane})
		for _, c := range []*client.Client{img, rows} {
			subscribeAll(c)
		}
		ctx := t.Context()
		first, err := img.Pull(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"projects", "notes"} {
			sec := first.Sections[id]
			if sec.Err != nil || len(sec.SegmentRefs) != 1 || sec.SegmentRefs[0].MediaType != ssp2.MediaSQLite || sec.BootstrapState != "" {
				t.Fatalf("%s: %+v", id, sec)
			}
		}
		checkServedImage(t, img, first.Sections["projects"].SegmentRefs[0], s.sch.Version, int64(n))
		if _, err := img.PullUntilIdle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if _, err := rows.PullUntilIdle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if st := img.Stats(); st.Images != 2 || st.Requests != 3 {
			t.Fatalf("image client: %d images in %d requests, want 2 in 3 (epoch, bootstrap, idle)", st.Images, st.Requests)
		}
		if st := rows.Stats(); st.Images != 0 || st.Requests != 3 {
			t.Fatalf("rows client: %d images in %d requests", st.Images, st.Requests)
		}
		for _, table := range []string{"projects", "notes"} {
			a, b := img.Rows(table), rows.Rows(table)
			if len(a) != len(b) || len(a) == 0 {
				t.Fatalf("%s: %d rows by image, %d by rows", table, len(a), len(b))
			}
			for id, want := range b {
				got, ok := a[id]
				if !ok || got.Version != want.Version || !bytes.Equal(got.Payload, want.Payload) {
					t.Fatalf("%s/%s: image %+v, rows %+v", table, id, got, want)
				}
			}
		}
		if _, v, _ := img.Get("notes", "n3"); v != 2 {
			t.Fatalf("edited note at version %d by image", v)
		}
		writeAndConverge(t, img, rows, 3, n+2) // three new rows, one deleted
	})
}

// checkServedImage downloads a descriptor's image through the direct
// endpoint and opens it with SQLite: one metadata row equal to the
// descriptor, the data table's row count.
func checkServedImage(t *testing.T, c *client.Client, ref *ssp2.SegmentRef, version int32, rows int64) {
	t.Helper()
	b, err := c.DownloadSegment(t.Context(), "projects", ref.SegmentID)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "served.sqlite")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var m sqliteimage.Metadata
	if err := db.QueryRow(sqliteimage.SelectMetadata).Scan(&m.Format, &m.Table, &m.SchemaVersion, &m.AsOfCommitSeq, &m.ScopeDigest, &m.RowCount); err != nil {
		t.Fatal(err)
	}
	want := sqliteimage.Metadata{Format: 1, Table: "projects", SchemaVersion: int64(version),
		AsOfCommitSeq: ref.AsOfCommitSeq, ScopeDigest: ref.ScopeDigest, RowCount: rows}
	if m != want || ref.RowCount != rows {
		t.Fatalf("served metadata %+v, descriptor %+v", m, ref)
	}
	var count int64
	if err := db.QueryRow(`SELECT count(*) FROM projects`).Scan(&count); err != nil || count != rows {
		t.Fatalf("data table holds %d rows (%v), want %d", count, err, rows)
	}
}

// caughtUp starts a server with a far-behind threshold of 20 changes,
// seeds 10 rows of alice's and a rows-lane client (10 changes a
// response) holding them all; behind(prefix, n) then puts it n one-row
// commits behind.
func caughtUp(t *testing.T, e engine) (*server, *client.Client, func(prefix string, n int)) {
	t.Helper()
	s := start(t, e, serverOpts{config: func(c *config.Config) { c.Pull.CatchUpChanges = 20 }})
	seedRows(t, s.store, s.sch, "proj", "alice", "a", 10, 10)
	far := laneClient(t, s, "far", client.Options{Accept: rowsLane, LimitCommits: 10})
	far.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
	if _, err := far.PullUntilIdle(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	behind := func(prefix string, n int) {
		for i := range n {
			seedRows(t, s.store, s.sch, "proj", "alice", fmt.Sprint(prefix, i), 1, 1)
		}
	}
	return s, far, behind
}

// §8.4 end to end, on each engine's own count: a gap of more than one
// response but within the threshold is served as commits without a
// probe; past the threshold the probe decides, and a bootstrap follows.
func TestCatchUpCountsBeforeItProbesE2E(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s, far, behind := caughtUp(t, e)
		ctx := t.Context()
		behind("g", 15)
		res, err := far.Pull(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sec := res.Sections["projects"]; sec.Bootstrap || sec.Commits != 10 || s.store.probes.Load() != 0 {
			t.Fatalf("within the threshold: %+v, %d probes", sec, s.store.probes.Load())
		}
		if _, err := far.PullUntilIdle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		behind("h", 25)
		if res, err = far.Pull(ctx); err != nil {
			t.Fatal(err)
		}
		if sec := res.Sections["projects"]; !sec.Bootstrap || s.store.probes.Load() != 1 {
			t.Fatalf("past the threshold: %+v, %d probes", sec, s.store.probes.Load())
		}
		if got := len(far.RowIDs("projects")); got != 50 {
			t.Fatalf("after catch-up %d rows, want 50", got)
		}
	})
}

// §8.4 end to end: a client far behind catches up through a bootstrap
// section instead of the commits, and after a delete in its gap through a
// reset and a fresh bootstrap; it converges either way.
func TestCatchUpThroughSegmentsE2E(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s, far, behind := caughtUp(t, e)
		ctx := t.Context()
		behind("g", 30)
		res, err := far.Pull(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sec := res.Sections["projects"]; !sec.Bootstrap || sec.Commits != 0 || sec.Status != ssp2.SubActive {
			t.Fatalf("far-behind pull: %+v", sec)
		}
		if got := len(far.RowIDs("projects")); got != 40 {
			t.Fatalf("after catch-up %d rows, want 40", got)
		}

		// A delete in the gap: the server answers with a reset, the
		// client re-bootstraps (and clears), the deleted row is gone.
		w := laneClient(t, s, "w", client.Options{})
		w.Queue(w.Delete("projects", "a-000003", -1))
		if _, err := w.Push(ctx); err != nil {
			t.Fatal(err)
		}
		behind("h", 30)
		res, err = far.Pull(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sec := res.Sections["projects"]; sec.Status != ssp2.SubReset {
			t.Fatalf("far-behind pull over a delete: %+v", sec)
		}
		if _, err := far.PullUntilIdle(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if got := len(far.RowIDs("projects")); got != 69 {
			t.Fatalf("after the re-bootstrap %d rows, want 69", got)
		}
		if _, _, ok := far.Get("projects", "a-000003"); ok {
			t.Fatal("the deleted row survived")
		}
	})
}

// Images travel like rows segments (§5.5, §5.8): stored in the engine's
// own database, downloaded re-authorized with ETag, 304 and compression,
// refused to other scopes and partitions, forgotten by the sweep, and
// expired by a newer backfill checkpoint (0.24).
func TestImageSegmentDelivery(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := startSegments(t, e, nil)
		ctx := t.Context()
		seedRows(t, s.store, s.sch, "img", "alice", "p", 600, 600)
		images := func(o *client.Options) { o.Accept |= ssp2.AcceptSQLite }
		c := s.newClient(t, "alice", "img", "", images)
		c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		refs := bootstrap(t, c)
		if len(refs) != 1 || refs[0].MediaType != ssp2.MediaSQLite || len(c.Rows("projects")) != 600 || c.Stats().Images != 1 {
			t.Fatalf("%d refs, %d rows, %d images", len(refs), len(c.Rows("projects")), c.Stats().Images)
		}
		id := refs[0].SegmentID
		pubs, err := s.segs.Publications(ctx, id)
		if err != nil || len(pubs) != 1 || pubs[0].MediaType != ports.SegmentSQLite || pubs[0].RowCount != 600 || pubs[0].PageSize != 0 {
			t.Fatalf("publications %+v %v", pubs, err)
		}
		for _, enc := range []string{"identity", "gzip", "zstd"} {
			cc := s.newClient(t, "alice", "img", "", func(o *client.Options) { o.AcceptEncoding = enc })
			cc.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
			if _, err := cc.DownloadSegment(ctx, "projects", id); err != nil {
				t.Fatalf("%s download: %v", enc, err)
			}
		}
		get := func(hdr map[string]string) *http.Response {
			req, _ := http.NewRequest(http.MethodGet, s.base+"/segments/"+id, nil)
			req.Header.Set("X-Syncd-Actor", "alice")
			req.Header.Set("X-Syncd-Partition", "img")
			req.Header.Set("X-Syncular-Scopes", `{"owner":["alice"]}`)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = resp.Body.Close() })
			return resp
		}
		if resp := get(map[string]string{"Accept-Encoding": "zstd"}); resp.StatusCode != 200 || resp.Header.Get("ETag") != `"`+id+`"` ||
			resp.Header.Get("Content-Encoding") != "zstd" || resp.Header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("download: %d %v", resp.StatusCode, resp.Header)
		}
		if resp := get(map[string]string{"If-None-Match": `"` + id + `"`}); resp.StatusCode != http.StatusNotModified {
			t.Fatalf("If-None-Match: %d", resp.StatusCode)
		}
		refused := func(name string, cc *client.Client, status int, code string) {
			t.Helper()
			cc.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
			_, err := cc.DownloadSegment(ctx, "projects", id)
			he, ok := err.(*client.HTTPError)
			if !ok || he.Status != status || he.Code != code {
				t.Fatalf("%s: %v, want %d %s", name, err, status, code)
			}
		}
		refused("scope loss", s.newClient(t, "alice", "img", `{"owner":["bob"],"project_id":["*"]}`, nil), 403, "sync.forbidden")
		refused("other partition", s.newClient(t, "alice", "elsewhere", "", nil), 404, "sync.not_found")

		// A newer backfill checkpoint expires the image; a fresh pull at
		// that version would mint another.
		if _, err := s.store.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: "img", Name: "next", SchemaVersion: s.sch.Version + 1}, time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		refused("newer checkpoint", s.newClient(t, "alice", "img", "", nil), 404, "sync.segment_expired")
		// The sweep forgets it once expired.
		swept, err := s.segs.Sweep(ctx, time.Now().Add(48*time.Hour).UnixMilli())
		if err != nil || swept.Segments != 1 {
			t.Fatalf("sweep %+v %v", swept, err)
		}
		refused("swept", s.newClient(t, "alice", "img", "", nil), 404, "sync.not_found")
	})
}

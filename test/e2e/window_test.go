package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// The served schema window (SPEC §9): the server runs version 3 (tasks
// gained the nullable column priority; the table labels is new) and
// still serves version 2, the test schema.

// startWindow starts a version-3 server serving [3, 2] on e.
func startWindow(t *testing.T, e engine) *server {
	t.Helper()
	v2 := filepath.Join(t.TempDir(), "v2.ir.json")
	if err := os.WriteFile(v2, ssptest.IR(), 0o600); err != nil {
		t.Fatal(err)
	}
	return start(t, e, serverOpts{ir: ssptest.NextIR(t), config: func(c *config.Config) { c.SchemaWindow.Older = []string{v2} }})
}

// versionClient is a Go client of alice generated at schema sch, talking
// to base, subscribed to project pr-1's tasks; accept 0 takes the
// client's default (rows and sqlite images), and pages of two rows make
// a five-row table take the image lane.
func versionClient(t *testing.T, base string, sch *schema.Schema, id string, accept uint8) *client.Client {
	t.Helper()
	h := http.Header{}
	h.Set("X-Syncd-Actor", "alice")
	h.Set("X-Syncd-Partition", "win")
	h.Set("X-Syncd-Scopes", `{"owner":["alice"],"project_id":["*"]}`)
	c, err := client.New(client.Options{BaseURL: strings.TrimSuffix(base, "/sync"), Schema: sch, ClientID: id, Header: h,
		Accept: accept, LimitSnapshotRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	c.Subscribe("tasks", "tasks", map[string][]string{"project_id": {"pr-1"}})
	return c
}

func schemaOf(t *testing.T, ir []byte) *schema.Schema {
	t.Helper()
	s, err := schema.Load(ir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// upsert queues a task write of the columns given (a whole row needs
// every column of the client's version).
func upsert(t *testing.T, c *client.Client, id string, cols ssptest.Cols) {
	t.Helper()
	cols["id"] = rowcodec.String(id)
	op, err := c.Upsert("tasks", id, cols, -1)
	if err != nil {
		t.Fatal(err)
	}
	c.Queue(op)
}

func newTask(id, title string) ssptest.Cols {
	return ssptest.Cols{"project_id": rowcodec.String("pr-1"), "title": rowcodec.String(title), "done": rowcodec.Bool(false),
		"estimate": rowcodec.Null(), "attachment": rowcodec.Null()}
}

func mustPush(t *testing.T, c *client.Client) {
	t.Helper()
	res, err := c.Push(t.Context())
	if err != nil {
		t.Fatalf("%s push: %v", c.ClientID(), err)
	}
	for _, p := range res.Pushes {
		if p.Status != ssp2.PushApplied {
			t.Fatalf("%s push: %+v", c.ClientID(), p)
		}
	}
}

func settle(t *testing.T, cs ...*client.Client) {
	t.Helper()
	for _, c := range cs {
		if _, err := c.PullUntilIdle(t.Context(), 20); err != nil {
			t.Fatalf("%s pull: %v", c.ClientID(), err)
		}
	}
}

// converged fails t unless every client holds want's tasks, each in its
// own version's columns, with the values want holds in them.
func converged(t *testing.T, want *client.Client, cs ...*client.Client) {
	t.Helper()
	ids := want.RowIDs("tasks")
	for _, c := range cs {
		if got := c.RowIDs("tasks"); strings.Join(got, ",") != strings.Join(ids, ",") {
			t.Fatalf("%s holds %v, want %v", c.ClientID(), got, ids)
		}
		for _, id := range ids {
			row, ver, ok := c.Get("tasks", id)
			full, wantVer, _ := want.Get("tasks", id)
			if !ok || ver != wantVer {
				t.Fatalf("%s row %s: not decodable in its version (%v) or version %d, want %d", c.ClientID(), id, ok, ver, wantVer)
			}
			for col, v := range row {
				if !v.Equal(full[col]) {
					t.Fatalf("%s row %s column %s = %v, want %v", c.ClientID(), id, col, v.Plain(), full[col].Plain())
				}
			}
		}
	}
}

// TestSchemaWindowServesOlderClients: version-2 clients bootstrap (rows
// and image lanes), pull incrementally, push and take realtime deltas
// from a version-3 server while a version-3 client writes the new
// column; all converge on the columns each knows. A version-1 client
// gets the floor naming 2 as required and 3 as latest.
func TestSchemaWindowServesOlderClients(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := startWindow(t, e)
		v2, v3 := ssptest.Schema(t), s.sch
		cur := versionClient(t, s.url, v3, "new", 0)
		for i := range 5 {
			cols := newTask(fmt.Sprint("t-", i), fmt.Sprint("task ", i))
			cols["priority"] = rowcodec.Int(int64(i))
			upsert(t, cur, fmt.Sprint("t-", i), cols)
		}
		mustPush(t, cur)
		settle(t, cur)

		rows := versionClient(t, s.url, v2, "old-rows", ssp2.AcceptInlineRows|ssp2.AcceptExternalRows)
		img := versionClient(t, s.url, v2, "old-image", 0)
		settle(t, rows, img)
		if st := img.Stats(); st.Images != 1 {
			t.Fatalf("the image client took no image: %+v", st)
		}
		if st := rows.Stats(); st.Images != 0 || st.InlineSegments+st.SegmentRefs == 0 {
			t.Fatalf("the rows client took no rows segment: %+v", st)
		}
		converged(t, cur, rows, img)

		// The old client edits a title and inserts a task it cannot
		// give a priority: the current client keeps t-0's and sees none
		// on t-5.
		upsert(t, rows, "t-0", ssptest.Cols{"title": rowcodec.String("task zero")})
		upsert(t, rows, "t-5", newTask("t-5", "task 5"))
		mustPush(t, rows)
		settle(t, cur, img)
		if r, _, _ := cur.Get("tasks", "t-0"); r["title"].Text() != "task zero" || r["priority"].Int() != 0 || r["priority"].IsNull() {
			t.Fatalf("t-0 at version 3: %v", r)
		}
		if r, _, _ := cur.Get("tasks", "t-5"); !r["priority"].IsNull() {
			t.Fatalf("t-5 at version 3: %v", r)
		}

		// Realtime: the old image client takes the current client's write
		// as a delta in its shape.
		rt := connect(t, img)
		// A stored cursor behind the log (a pull's record write skipped
		// while fresh) makes the first notice a catch-up wake-up, which
		// the client serves with a round; the next write is a delta.
		for attempt := 0; ; attempt++ {
			upsert(t, cur, "t-1", ssptest.Cols{"title": rowcodec.String("task one"), "priority": rowcodec.Int(int64(11 + attempt))})
			mustPush(t, cur)
			ev := next(t, rt)
			if ev.Delta != nil {
				break
			}
			if ev.Wake == nil || attempt == 2 {
				t.Fatalf("want a delta, got %+v", ev)
			}
		}
		if r, _, ok := img.Get("tasks", "t-1"); !ok || r["title"].Text() != "task one" {
			t.Fatalf("delta at version 2: %v %v", r, ok)
		}
		if img.Stats().Deltas == 0 {
			t.Fatal("no delta counted")
		}

		before := rows.Stats().Commits
		settle(t, rows, cur)
		if rows.Stats().Commits == before {
			t.Fatal("the rows client pulled no commit incrementally")
		}
		converged(t, cur, rows, img)

		// Outside the window: the floor.
		gone := versionClient(t, s.url, schemaOf(t, ssptest.IRAt(t, 1)), "gone", 0)
		res, err := gone.Pull(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if h := res.Header; h.RequiredSchemaVersion != ssp2.Some(int32(2)) || h.LatestSchemaVersion != ssp2.Some(int32(3)) || len(gone.RowIDs("tasks")) != 0 {
			t.Fatalf("floor header %+v", h)
		}

		// The gauge counts each client under its version.
		got := clientsByVersion(t, s)
		if got["2"] != "2" || got["3"] != "1" || got["unserved"] != "1" {
			t.Fatalf("syncd_clients_by_schema_version %v", got)
		}
	})
}

// clientsByVersion reads syncd_clients_by_schema_version from /metrics.
func clientsByVersion(t *testing.T, s *server) map[string]string {
	t.Helper()
	resp, err := http.Get(s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), `syncd_clients_by_schema_version{schema_version="`)
		if !ok {
			continue
		}
		label, value, _ := strings.Cut(line, `"} `)
		out[label] = value
	}
	return out
}

// switchable is a reverse proxy whose backend can change: the load
// balancer of a rolling deploy.
type switchable struct {
	srv    *httptest.Server
	target atomic.Pointer[url.URL]
}

func newSwitchable(t *testing.T) *switchable {
	t.Helper()
	sw := &switchable{}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(sw.target.Load())
		r.Out.Host = r.In.Host
	}}
	sw.srv = httptest.NewServer(rp)
	t.Cleanup(sw.srv.Close)
	return sw
}

func (sw *switchable) to(t *testing.T, s *server) {
	t.Helper()
	u, err := url.Parse(strings.TrimSuffix(s.url, "/sync"))
	if err != nil {
		t.Fatal(err)
	}
	sw.target.Store(u)
}

// sameDatabase is an engine whose every open reaches one database.
func sameDatabase(t *testing.T, name string) engine {
	t.Helper()
	if name == "sqlite" {
		path := filepath.Join(t.TempDir(), "syncd.db")
		return engine{name, func(t *testing.T) ports.Storage {
			st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}}
	}
	dsn := pgtest.DSN(t)
	return engine{name, func(t *testing.T) ports.Storage {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}}
}

// TestSchemaWindowAcrossABump is the operator story: version 2 serves;
// version 3 is deployed on the same database with the window [3, 2]
// (the migration re-encodes the stored rows and log for the appended
// column; the version-2 node then refuses to serve); a version-2 client
// that was behind pulls, through the same address, the commits written
// before the bump and after it, in its shape, and keeps pushing.
func TestSchemaWindowAcrossABump(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := sameDatabase(t, e.name)
			lb := newSwitchable(t)
			s2 := start(t, db, serverOpts{})
			lb.to(t, s2)
			v2 := ssptest.Schema(t)
			writer := versionClient(t, lb.srv.URL, v2, "writer", 0)
			behind := versionClient(t, lb.srv.URL, v2, "behind", ssp2.AcceptInlineRows|ssp2.AcceptExternalRows)
			for i := range 3 {
				upsert(t, writer, fmt.Sprint("t-", i), newTask(fmt.Sprint("t-", i), fmt.Sprint("task ", i)))
			}
			mustPush(t, writer)
			settle(t, writer, behind)
			// Commits the behind client has not pulled before the bump.
			upsert(t, writer, "t-1", ssptest.Cols{"title": rowcodec.String("task one")})
			upsert(t, writer, "t-3", newTask("t-3", "task 3"))
			mustPush(t, writer)

			s3 := startWindow(t, db)
			lb.to(t, s3)
			cur := versionClient(t, lb.srv.URL, s3.sch, "new", 0)
			settle(t, cur)
			upsert(t, cur, "t-2", ssptest.Cols{"title": rowcodec.String("task two"), "priority": rowcodec.Int(2)})
			cols := newTask("t-4", "task 4")
			cols["priority"] = rowcodec.Int(4)
			upsert(t, cur, "t-4", cols)
			mustPush(t, cur)

			cursor := behind.Subscription("tasks").Cursor
			before := behind.Stats()
			settle(t, behind, cur)
			if st := behind.Stats(); st.Commits-before.Commits < 3 || st.InlineSegments+st.SegmentRefs != before.InlineSegments+before.SegmentRefs {
				t.Fatalf("the behind client (cursor %d) did not catch up by commits: %+v → %+v", cursor, before, st)
			}
			upsert(t, behind, "t-0", ssptest.Cols{"title": rowcodec.String("task zero")})
			mustPush(t, behind)
			settle(t, writer, behind, cur)
			converged(t, cur, behind, writer)
			if r, _, _ := cur.Get("tasks", "t-0"); r["title"].Text() != "task zero" || !r["priority"].IsNull() {
				t.Fatalf("t-0 at version 3: %v", r)
			}

			// A version-3 client replaying the whole log reads the commits
			// of version 2 in version 3's layout: the migration re-encoded
			// the log too.
			replay := versionClient(t, lb.srv.URL, s3.sch, "replay", 0)
			if err := replay.AcquireEpoch(t.Context()); err != nil {
				t.Fatal(err)
			}
			replay.Subscription("tasks").Cursor = 0
			settle(t, replay)
			if st := replay.Stats(); st.Commits < 5 || st.InlineSegments+st.SegmentRefs+st.Images != 0 {
				t.Fatalf("the replay was no incremental pull of the whole log: %+v", st)
			}
			converged(t, cur, replay)

			// The version-2 node refuses now that the database is at 3.
			if rep := s2.post(call{actor: "alice", partition: "win"}, ssptest.Req{ClientID: "x", SchemaVersion: 2, Pull: true, NoEpoch: true}.Encode(t)); rep.status != http.StatusServiceUnavailable {
				t.Fatalf("the version-2 node answered %d: %s", rep.status, rep.body)
			}
		})
	}
}

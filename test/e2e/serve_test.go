package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// startServe assembles the server the way "syncd serve" does: the flags
// through config.Load, the storage through wiring.StorageModule (which opens
// --database itself), the default segment store (db) and the banner; no
// test double between the HTTP API and the SQL engine.
func startServe(t *testing.T, database string) (base string, st ports.Storage, segs ports.SegmentStore, sch *schema.Schema) {
	t.Helper()
	res := serveConfig(t, database)
	if res.Config.Segments.Store != config.SegmentStoreDB {
		t.Fatalf("default segment store %q", res.Config.Segments.Store)
	}
	var ready *platform.Readiness
	var listeners *platform.Listeners
	a := fx.New(app.Options(res.Config, platform.BuildInfo{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		wiring.StorageModule, app.WithBanner(io.Discard), fx.Populate(&ready, &listeners, &st, &segs, &sch)))
	startReady(t, a, ready, func(err error) {
		if err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if _, ok := segs.(*memseg.Store); ok {
		t.Fatal("segments kept in memory over an SQL engine")
	}
	return "http://" + listeners.Addr(platform.ServerSync).String(), st, segs, sch
}

// The done clause of the pull issue: the server "syncd serve" assembles,
// on SQLite and PostgreSQL, lets two project-built clients bootstrap
// (referenced pages downloaded from the in-database segment store, and
// inline pages), write, and converge.
func TestServeProjectClientsConverge(t *testing.T) {
	for _, tc := range []struct {
		name     string
		database func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, st, segs, sch := startServe(t, tc.database(t))
			const rows = 3000
			seedRows(t, st, sch, "proj", "alice", "s", rows, 1000)
			gets := &segmentGets{rt: &http.Transport{DisableCompression: true}}
			newClient := func(id string, accept uint8) *client.Client {
				h := http.Header{}
				h.Set("X-Syncd-Actor", "alice")
				h.Set("X-Syncd-Partition", "proj")
				h.Set("X-Syncd-Scopes", `{"owner":["alice"],"project_id":["*"]}`)
				c, err := client.New(client.Options{BaseURL: base, Schema: sch, ClientID: id, Header: h, Accept: accept,
					HTTP:              &http.Client{Transport: gets},
					LimitSnapshotRows: 1000, MaxSnapshotPages: 1})
				if err != nil {
					t.Fatal(err)
				}
				c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
				return c
			}
			// a takes external segments only (every page a SEGMENT_REF);
			// b takes both (1000-row pages stay under the inline threshold).
			a := newClient("a", ssp2.AcceptExternalRows)
			b := newClient("b", ssp2.AcceptInlineRows|ssp2.AcceptExternalRows)
			ctx := t.Context()
			for _, c := range []*client.Client{a, b} {
				if _, err := c.PullUntilIdle(ctx, 50); err != nil {
					t.Fatal(err)
				}
				if n := len(c.RowIDs("projects")); n != rows {
					t.Fatalf("%s bootstrapped %d rows", c.ClientID(), n)
				}
			}
			if s := a.Stats(); s.SegmentRefs != 3 || s.SegmentDownloads != 3 || s.InlineSegments != 0 {
				t.Fatalf("a: %+v", s)
			}
			if s := b.Stats(); s.InlineSegments != 3 || s.SegmentRefs != 0 {
				t.Fatalf("b: %+v", s)
			}
			// The referenced pages were downloaded over HTTP from the
			// database's segment store.
			if len(gets.ids) != 3 {
				t.Fatalf("segment downloads %v", gets.ids)
			}
			for _, id := range gets.ids {
				if pubs, err := segs.Publications(ctx, id); err != nil || len(pubs) != 1 || pubs[0].Partition != "proj" {
					t.Fatalf("publications of %s: %+v %v", id, pubs, err)
				}
				rc, n, err := segs.Open(ctx, id)
				if err != nil || n == 0 {
					t.Fatalf("stored segment %s: %d %v", id, n, err)
				}
				_ = rc.Close()
			}
			writeAndConverge(t, a, b, 5, rows+4)
			if _, _, ok := b.Get("projects", "a-4"); !ok {
				t.Fatal("a's write not at b")
			}
		})
	}
}

// segmentGets records the ids of GET <mount>/segments/{id} requests.
type segmentGets struct {
	mu  sync.Mutex
	ids []string
	rt  http.RoundTripper
}

func (g *segmentGets) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		if _, id, ok := strings.Cut(r.URL.Path, "/segments/"); ok {
			g.mu.Lock()
			g.ids = append(g.ids, id)
			g.mu.Unlock()
		}
	}
	return g.rt.RoundTrip(r)
}

// serveConfig is the configuration of `syncd serve` with the test schema,
// dev auth and ephemeral listeners, loaded as the command loads it.
func serveConfig(t *testing.T, database string) config.Result {
	t.Helper()
	irPath := filepath.Join(t.TempDir(), "schema.ir.json")
	if err := os.WriteFile(irPath, ssptest.IR(), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := config.Load([]string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--database", database, "--schema", irPath, "--auth", "dev", "--shutdown-delay", "0"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

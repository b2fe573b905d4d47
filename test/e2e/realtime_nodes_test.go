package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/adapters/fanout/pgnotify"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestRealtimeAcrossNodes: two syncd nodes on one PostgreSQL database
// deliver each other's commits to their sockets (the fanout carries the
// notice, each node reads the commit from the shared storage).
func TestRealtimeAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	shared := engine{name: "postgres", open: func(t *testing.T) ports.Storage {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, MaxConns: 8})
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		return st
	}}
	node := func() (*server, *pgnotify.Fanout) {
		var f ports.Fanout
		s := start(t, shared, serverOpts{
			// The database names the fanout (auto: LISTEN/NOTIFY); the
			// storage itself is the harness's.
			config: func(c *config.Config) { c.Database = dsn },
			extra:  []fx.Option{fx.Populate(&f)},
		})
		pf, ok := f.(*pgnotify.Fanout)
		if !ok {
			t.Fatalf("fanout %T, want LISTEN/NOTIFY", f)
		}
		waitFor(t, "the node listening", pf.Listening)
		return s, pf
	}
	a, _ := node()
	b, _ := node()
	owner := map[string][]string{"owner": {"alice"}}
	replica := func(s *server, id string) *replica {
		r := newReplica(t, s, alice("nodes"), id)
		r.subscribe("projects", "projects", owner)
		r.pull()
		return r
	}
	ra, rb := replica(a, "a"), replica(b, "b")
	ka, kb := dial(t, a, alice("nodes"), "a"), dial(t, b, alice("nodes"), "b")
	for _, k := range []*socket{ka, kb} {
		if _, ok := k.event().(*realtime.Hello); !ok {
			t.Fatal("hello first")
		}
	}
	// A push on node a reaches the socket on node b, and the other way.
	ra.pull(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, a.sch, "p-1", "alice", "One"), -1)))
	wantDeltaUpTo(t, kb, 1)
	rb.pull(ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", project(t, b.sch, "p-2", "alice", "Two"), -1)))
	wantDeltaUpTo(t, ka, 2)
	// Each node counts the notice it published and both it heard.
	for _, s := range []*server{a, b} {
		m := scrape(t, s)
		for _, want := range []string{`syncd_fanout_notices_total{event="published"} 1`, `syncd_fanout_notices_total{event="received"} 2`} {
			if !strings.Contains(m, want) {
				t.Fatalf("metrics lack %q", want)
			}
		}
	}
}

// wantDeltaUpTo reads deltas until one reaches cursor (a socket also
// hears the commits it was woken for earlier, its own client's included),
// skipping heartbeats.
func wantDeltaUpTo(t *testing.T, k *socket, cursor int64) {
	t.Helper()
	for {
		typ, d := k.must()
		if typ == websocket.MessageText {
			if m, err := realtime.ParseServerEvent(d); err == nil {
				if _, hb := m.(*realtime.Heartbeat); hb {
					continue
				}
			}
		}
		if typ != websocket.MessageBinary || d[0] != realtime.TagDelta {
			t.Fatalf("want a delta, got %d %s", typ, d)
		}
		_, en, commits, _ := sections(ssptest.DecodeResponse(t, d[1:]))
		if commits != 1 || len(en) != 1 || en[0].NextCursor > cursor {
			t.Fatalf("delta: %d commits, ends %+v; want one commit up to cursor %d", commits, en, cursor)
		}
		if en[0].NextCursor == cursor {
			return
		}
	}
}

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/fx"

	natsfanout "github.com/syncd-dev/syncd/adapters/fanout/nats"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/natstest"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestRealtimeAcrossNodesNATS: two nodes on one PostgreSQL database with
// --fanout nats deliver each other's commits to their sockets, in a
// partition whose name no NATS subject token may hold verbatim. When the
// NATS server restarts, both nodes resubscribe and resync: the commit
// pushed while it was down reaches the other node's socket, and delivery
// resumes.
func TestRealtimeAcrossNodesNATS(t *testing.T) {
	dsn := pgtest.DSN(t)
	srv := natstest.Start(t)
	shared := engine{name: "postgres", open: func(t *testing.T) ports.Storage {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, MaxConns: 8})
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		return st
	}}
	node := func() (*server, *natsfanout.Fanout) {
		var f ports.Fanout
		s := start(t, shared, serverOpts{
			// The database names the deployment's subjects; the storage
			// itself is the harness's.
			config: func(c *config.Config) { c.Database, c.Fanout, c.NATS.URL = dsn, config.FanoutNATS, srv.URL() },
			extra:  []fx.Option{fx.Populate(&f)},
		})
		nf, ok := f.(*natsfanout.Fanout)
		if !ok {
			t.Fatalf("fanout %T, want NATS", f)
		}
		waitFor(t, "the node subscribed", nf.Listening)
		return s, nf
	}
	a, fa := node()
	b, fb := node()
	if fa.Subject() != fb.Subject() || fa.Subject() == "" {
		t.Fatalf("nodes on one database on subjects %q and %q", fa.Subject(), fb.Subject())
	}
	const partition = "team a.b*>"
	owner := map[string][]string{"owner": {"alice"}}
	join := func(s *server, id string) *replica {
		r := newReplica(t, s, alice(partition), id)
		r.subscribe("projects", "projects", owner)
		r.pull()
		return r
	}
	ra, rb := join(a, "a"), join(b, "b")
	ka, kb := dial(t, a, alice(partition), "a"), dial(t, b, alice(partition), "b")
	for _, k := range []*socket{ka, kb} {
		if _, ok := k.event().(*realtime.Hello); !ok {
			t.Fatal("hello first")
		}
	}
	push := func(r *replica, s *server, id string) {
		t.Helper()
		r.pull(ssptest.Commit("k-"+id, ssptest.Upsert("projects", id, project(t, s.sch, id, "alice", id), -1)))
	}
	// A push through b reaches the socket on a, and the other way.
	push(rb, b, "p-1")
	wantDeltaUpTo(t, ka, 1)
	push(ra, a, "p-2")
	wantDeltaUpTo(t, kb, 2)

	// The NATS server restarts. Meanwhile a commit lands through a third
	// node that announces nothing (--fanout local): only the resync that
	// follows the restart can bring it to the socket on a.
	c := start(t, shared, serverOpts{config: func(c *config.Config) { c.Database, c.Fanout = dsn, config.FanoutLocal }})
	rc := join(c, "c")
	resyncs := func(s *server) float64 { return metric(t, scrape(t, s), `syncd_fanout_notices_total{event="resync"}`) }
	before := []float64{resyncs(a), resyncs(b)}
	srv.Stop()
	waitFor(t, "both nodes noticing", func() bool { return !fa.Listening() && !fb.Listening() })
	push(rc, c, "p-3")
	srv.Restart()
	waitFor(t, "both nodes resubscribed", func() bool {
		return fa.Listening() && fb.Listening() && fa.Reconnects() >= 1 && fb.Reconnects() >= 1
	})
	wantDeltaUpTo(t, ka, 3)
	wantDeltaUpTo(t, kb, 3)
	push(ra, a, "p-4")
	wantDeltaUpTo(t, kb, 4)
	for i, s := range []*server{a, b} {
		m := scrape(t, s)
		for _, want := range []string{`syncd_fanout_reconnects_total 1`, `syncd_fanout_listening 1`} {
			if !strings.Contains(m, want) {
				t.Fatalf("metrics lack %q", want)
			}
		}
		if after := resyncs(s); after <= before[i] {
			t.Fatalf("node %d: resyncs %v before the restart, %v after", i, before[i], after)
		}
	}
}

// metric is the value of the sample named exactly series in a /metrics
// text (0 when absent).
func metric(t *testing.T, text, series string) float64 {
	t.Helper()
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return 0
}

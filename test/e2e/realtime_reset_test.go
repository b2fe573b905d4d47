package e2e

import (
	"context"
	"testing"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestRealtimeResetBelowTheHorizon: a socket whose stored cursor was
// pruned past is woken with reset-required, not catchup-required (SPEC
// §8.3: its pull answers with a reset section, §4.6).
func TestRealtimeResetBelowTheHorizon(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		var rf ports.ScopeRefresher
		// Every pull writes its record, so the stored cursor is the pulled one.
		s := start(t, e, serverOpts{extra: []fx.Option{fx.Populate(&rf)}, config: func(c *config.Config) { c.Pull.ClientRecordRefresh = 0 }})
		ctx := context.Background()
		owner := map[string][]string{"owner": {"alice"}}
		r := newReplica(t, s, alice("rt-prune"), "c1")
		r.subscribe("projects", "projects", owner)
		r.pull()
		seedCommits(t, s.store, s.sch, "rt-prune", "alice", 40, 40)
		r.hdr.LimitCommits = 10
		r.pull() // the stored cursor is 10
		ep, _, _ := s.store.LogEpoch(ctx, "rt-prune")
		if _, err := s.store.PruneCommitsThrough(ctx, "rt-prune", ports.PruneRequest{LogEpoch: ep, ThroughSeq: 20}); err != nil {
			t.Fatal(err)
		}
		k := dial(t, s, alice("rt-prune"), "c1")
		if h, ok := k.event().(*realtime.Hello); !ok || !h.RequiresSync || h.Cursor != 10 || h.LatestCursor != 40 {
			t.Fatalf("hello %+v", h)
		}
		w := newReplica(t, s, alice("rt-prune"), "writer")
		w.subscribe("projects", "projects", owner)
		w.pull(ssptest.Commit("k1", ssptest.Upsert("projects", "p-new", project(t, s.sch, "p-new", "alice", "New"), -1)))
		if wk, ok := k.event().(*realtime.Wake); !ok || wk.Reason != realtime.WakeResetRequired || wk.Cursor != 41 {
			t.Fatalf("want reset-required at 41, got %+v", wk)
		}
		// The graph hands hosts the hub as its scope refresher.
		if n := rf.RefreshScopes(ctx, "rt-prune", "alice"); n != 1 {
			t.Fatalf("refreshed %d sessions, want the one socket", n)
		}
		if n := rf.RefreshScopes(ctx, "rt-prune", "bob"); n != 0 {
			t.Fatalf("refreshed %d sessions of another actor", n)
		}
	})
}

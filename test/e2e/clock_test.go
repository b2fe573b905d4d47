package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// fixedClock reads one instant far from the wall clock's.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func (fixedClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// TestServerReadsTimeFromTheClock: the assembled server stamps commits
// and reports readiness on the one clock of the graph, so a replaced clock
// is what clients see.
func TestServerReadsTimeFromTheClock(t *testing.T) {
	at := time.UnixMilli(1_900_000_000_123)
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{extra: []fx.Option{
			fx.Decorate(func(platform.Clock) platform.Clock { return fixedClock{at} }),
		}})
		r := newReplica(t, s, alice("clock"), "c1")
		r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		r.apply(r.pull())
		resp := r.pull(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)))
		if len(resp.Results) != 1 || resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("push: %+v", resp.Results)
		}
		r.apply(resp)
		var stamps []int64
		for _, rs := range []ssptest.Resp{resp, r.pull()} {
			for _, f := range rs.Msg.Frames {
				if c, ok := f.(*ssp2.Commit); ok {
					stamps = append(stamps, c.CreatedAtMs)
				}
			}
		}
		if len(stamps) != 1 || stamps[0] != at.UnixMilli() {
			t.Fatalf("commit createdAtMs %v, want [%d] from the clock", stamps, at.UnixMilli())
		}

		res, err := http.Get(s.admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var st platform.Status
		if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if !st.Since.Equal(at) {
			t.Fatalf("/readyz since %s, want %s from the clock", st.Since, at)
		}
	})
}

package round_test

import (
	"context"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// headCounter counts the request heads read.
type headCounter struct {
	*memory.Store
	heads int
}

func (h *headCounter) TouchPartitionHead(ctx context.Context, q ports.HeadQuery) (ports.RequestHead, error) {
	h.heads++
	return h.Store.TouchPartitionHead(ctx, q)
}

// A push-only request to a partition whose head was read within
// HeadReuse reads none of its own; one admitted at an epoch rotated
// meanwhile is served again from its head (a reset, nothing applied,
// at most one scope resolution), and the rotated epoch is remembered
// after it.
func TestPushOnlyReusesARecentHead(t *testing.T) {
	tests := []struct {
		name  string
		reuse time.Duration
		heads []int // after each step
	}{
		{"every request reads its head", 0, []int{1, 2, 3, 4}},
		{"a recent head is reused", time.Second, []int{1, 1, 2, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hc *headCounter
			resolutions := 0
			e := roundtest.New(t, func(o *roundtest.Options) {
				hc = &headCounter{Store: o.Store.(*memory.Store)}
				o.Store = hc
				o.Round.HeadReuse = tc.reuse
				o.Round.Resolver = roundtest.ResolverFunc(func(ctx context.Context, r ports.ScopeRequest) (scopes.Allowed, error) {
					resolutions++
					return roundtest.AllowAll(ctx, r)
				})
			})
			ctx := context.Background()
			up := func(id string) *ssp2.PushCommit {
				return ssptest.Commit("k-"+id, ssptest.Upsert("projects", id, e.Project(id, "alice", id), -1))
			}
			applied := func(id string) bool {
				row, err := e.Store.GetRow(ctx, "p1", "projects", id)
				if err != nil {
					t.Fatal(err)
				}
				return row != nil
			}
			step := func(i int, r ssptest.Req) ssptest.Resp {
				t.Helper()
				resolutions = 0
				resp, _ := e.Must(r)
				if hc.heads != tc.heads[i] || resolutions > 1 {
					t.Fatalf("step %d: %d heads, %d resolutions; want %d, at most 1", i, hc.heads, resolutions, tc.heads[i])
				}
				return resp
			}
			step(0, e.Req(up("a")))
			if resp := step(1, e.Req(up("b"))); resp.Results[0].Status != ssp2.PushApplied || resp.Header.LogEpoch != e.Epoch || !applied("b") {
				t.Fatalf("second push %+v %+v", resp.Header, resp.Results)
			}
			rotated, err := e.Store.RotateLogEpoch(ctx, "p1")
			if err != nil {
				t.Fatal(err)
			}
			if resp := step(2, e.Req(up("c"))); !resp.Header.ResetRequired || resp.Header.LogEpoch != rotated || len(resp.Results) != 0 || applied("c") {
				t.Fatalf("push at the rotated epoch %+v %+v", resp.Header, resp.Results)
			}
			e.Epoch = rotated
			if resp := step(3, e.Req(up("d"))); resp.Results[0].Status != ssp2.PushApplied || resp.Header.LogEpoch != rotated || !applied("d") {
				t.Fatalf("push at the new epoch %+v %+v", resp.Header, resp.Results)
			}
		})
	}
}

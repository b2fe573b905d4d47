package round_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	pullsvc "github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// behindLog is the pull's storage answering log maxima lag commits
// behind, as a query cache or a lagging replica would.
type behindLog struct {
	*memory.Store
	lag *atomic.Int64
}

func (b behindLog) LogBounds(ctx context.Context, partition string) (ports.LogBounds, error) {
	lb, err := b.Store.LogBounds(ctx, partition)
	lb.MaxSeq = max(lb.MaxSeq-b.lag.Load(), lb.HorizonSeq)
	return lb, err
}

// TestStaleReadAfterOwnCommit is SPEC §7 and §10.2: a combined round
// whose pull reads a log maximum below a commit this request applied
// fails with sync.storage_stale_read, and the commit stays applied. A
// round that applied nothing (a push-only request, a replay, a
// rejection) has no commit of its own the read must hold.
func TestStaleReadAfterOwnCommit(t *testing.T) {
	var lag atomic.Int64
	e := roundtest.New(t, func(o *roundtest.Options) {
		p, err := pullsvc.New(pullsvc.Options{Store: behindLog{Store: o.Store.(*memory.Store), lag: &lag}, Now: o.Now})
		if err != nil {
			t.Fatal(err)
		}
		o.Round.Pull = p
	})
	pulling := func(c *ssp2.PushCommit) ssptest.Req {
		r := e.Req(c)
		r.Pull, r.SubTable = true, "projects"
		return r
	}
	unknown := ssptest.Commit("k-bad", ssptest.Upsert("nope", "x", []byte{0}, -1))
	for _, tc := range []struct {
		name   string
		lag    int64
		req    ssptest.Req
		code   syncerr.Code
		status ssp2.PushStatus
	}{
		{"fresh storage serves the round", 0, pulling(e.Own("k1", "p-1", "alice")), "", ssp2.PushApplied},
		{"a read one commit behind fails it", 1, pulling(e.Own("k2", "p-2", "alice")), syncerr.StorageStaleRead, 0},
		{"a push-only request reads no log maximum", 1, e.Req(e.Own("k3", "p-3", "alice")), "", ssp2.PushApplied},
		{"a replay applies nothing in this request", 1, pulling(e.Own("k3", "p-3", "alice")), "", ssp2.PushCached},
		{"a rejection applies nothing", 1, pulling(unknown), "", ssp2.PushRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lag.Store(tc.lag)
			resp, _, err := e.Do(tc.req)
			if tc.code != "" {
				roundtest.WantCode(t, err, tc.code)
				return
			}
			if err != nil || resp.Results[0].Status != tc.status {
				t.Fatalf("err %v, results %+v: want %s", err, resp.Results, tc.status)
			}
		})
	}
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		if row, err := e.Store.GetRow(context.Background(), "p1", "projects", id); err != nil || row == nil {
			t.Fatalf("row %s: %+v %v", id, row, err)
		}
	}
}

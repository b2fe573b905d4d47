package push_test

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestStoredScopeLimit: a write whose row would store a scope value past
// the limit is rejected (that operation's sync.invalid_request), so no
// stored value is one no subscription could ask for.
func TestStoredScopeLimit(t *testing.T) {
	e := roundtest.New(t, func(o *roundtest.Options) { o.Limits = limits.Limits{MaxScopeValueBytes: 8} })
	resp, _ := e.Must(e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "123456789", "One"), -1))))
	roundtest.WantRejected(t, resp.Results[0], 0, string(syncerr.InvalidRequest))
	if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-1"); row != nil {
		t.Fatal("row with an overlong scope value was stored")
	}
	resp, _ = e.Must(e.Req(ssptest.Commit("k2", ssptest.Upsert("projects", "p-1", e.Project("p-1", "12345678", "One"), -1))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("scope value at the limit: %+v", resp.Results[0])
	}
}

package round_test

import (
	"context"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestRequestLimits: ids and request shape past the host limits are
// refused as a whole with a catalog code, before anything is stored.
func TestRequestLimits(t *testing.T) {
	lim := limits.Limits{MaxIDBytes: 16, MaxScopeValueBytes: 8, MaxScopeValues: 3, MaxSubscriptions: 2}
	e := roundtest.New(t, func(o *roundtest.Options) { o.Limits = lim })
	long := strings.Repeat("x", 17)
	sub := func(id string, sc map[string][]string) *ssp2.Subscription {
		return &ssp2.Subscription{ID: id, Table: "projects", Scopes: ssp2.ScopeListsFromMap(sc), Cursor: -1}
	}
	owner := func(vs ...string) map[string][]string { return map[string][]string{"owner": vs} }
	cases := []struct {
		name     string
		clientID string
		commitID string
		subs     []*ssp2.Subscription
		want     syncerr.Code
	}{
		{"client id longer than the limit", long, "k1", nil, syncerr.InvalidClientID},
		{"client commit id longer than the limit", "c1", long, nil, syncerr.InvalidRequest},
		{"more subscriptions than the limit", "c1", "", []*ssp2.Subscription{sub("a", owner("x")), sub("b", owner("x")), sub("c", owner("x"))}, syncerr.InvalidRequest},
		{"subscription id longer than the limit", "c1", "", []*ssp2.Subscription{sub(long, owner("x"))}, syncerr.InvalidSubscription},
		{"scope value longer than the limit", "c1", "", []*ssp2.Subscription{sub("a", owner("123456789"))}, syncerr.InvalidSubscription},
		{"more scope values than the limit", "c1", "", []*ssp2.Subscription{sub("a", owner("1", "2", "3", "4"))}, syncerr.InvalidSubscription},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frames := []ssp2.Frame{&ssp2.ReqHeader{ClientID: c.clientID, SchemaVersion: e.Schema.Version, LogEpoch: ssp2.Some(e.Epoch)}}
			if c.commitID != "" {
				frames = append(frames, ssptest.Commit(c.commitID, ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1)))
			}
			if c.subs != nil {
				frames = append(frames, &ssp2.PullHeader{LimitCommits: 100, LimitSnapshotRows: 100, MaxSnapshotPages: 1, Accept: ssp2.AcceptInlineRows})
				for _, s := range c.subs {
					frames = append(frames, s)
				}
			}
			body, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: frames})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Round.Handle(context.Background(), e.ID, body)
			roundtest.WantCode(t, err, c.want)
			if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-1"); row != nil {
				t.Fatal("a refused request applied its push")
			}
		})
	}
	// At the limits everything is accepted.
	r := e.Req(ssptest.Commit(strings.Repeat("k", 16), ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1)))
	r.ClientID = strings.Repeat("c", 16)
	if resp, _ := e.Must(r); resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("push at the limits: %+v", resp.Results[0])
	}
}

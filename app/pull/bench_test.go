package pull_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

func benchPull(b *testing.B, h ssp2.PullHeader, cursor int64, seed func(e *env)) {
	e := newEnv(&testing.T{}, nil)
	seed(e)
	r := pull.Request{Partition: part, ActorID: "alice", ClientID: "c1", WireVersion: 3, LogEpoch: e.epoch, Schema: e.sch, Header: &h,
		Scopes: scopes.Granted(aliceGrant), Subscriptions: []*ssp2.Subscription{{ID: "s", Table: "projects",
			Scopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}}), Cursor: cursor}}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		sp := e.svc.NewSpool()
		if err := e.svc.Pull(context.Background(), r, sp); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(sp.Len())
		_ = sp.Close()
	}
}

// BenchmarkIncremental1000 serves a window of 1000 single-change commits.
func BenchmarkIncremental1000(b *testing.B) {
	benchPull(b, ssp2.PullHeader{Accept: ssp2.AcceptInlineRows}, 0, func(e *env) {
		for i := range 1000 {
			e.seed("alice", fmt.Sprintf("a%04d", i), 1)
		}
	})
}

// BenchmarkBootstrapPage1000 builds and inlines one 1000-row page.
func BenchmarkBootstrapPage1000(b *testing.B) {
	benchPull(b, ssp2.PullHeader{Accept: ssp2.AcceptInlineRows, LimitSnapshotRows: 1000, MaxSnapshotPages: 1}, -1, func(e *env) {
		e.seed("alice", "a", 1000)
	})
}

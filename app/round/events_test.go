package round_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/leases/memlease"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// sinkLog is a synchronous sink: the use case's events in emission order.
type sinkLog struct {
	mu  sync.Mutex
	got []event.Event
}

func (s *sinkLog) Emit(e event.Event) {
	s.mu.Lock()
	s.got = append(s.got, e)
	s.mu.Unlock()
}

func (s *sinkLog) resolutions() []event.ScopeResolutionFailed {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []event.ScopeResolutionFailed
	for _, e := range s.got {
		if r, ok := e.(event.ScopeResolutionFailed); ok {
			out = append(out, r)
		}
	}
	return out
}

// An outage answered from the client's auth lease is still a failed
// resolution (the resolver is down), marked Leased and refusing nothing;
// a live round reports none.
func TestLeasedRoundReportsTheResolverOutage(t *testing.T) {
	sink := &sinkLog{}
	res := &switchable{grant: scopes.Allowed{"owner": {"alice"}, "project_id": {"p-1"}}}
	ks, err := lease.NewKeySet(bytes.Repeat([]byte{7}, lease.MinKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	svc, err := leases.New(leases.Options{Store: memlease.New(), Keys: ks, TTL: 15 * time.Minute, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	e := roundtest.New(t, func(o *roundtest.Options) { o.Round.Resolver, o.Round.Leases, o.Now, o.Events = res, svc, clock, sink })
	if r, _ := e.Must(e.Req(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1)))); r.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("live round %+v", r.Results[0])
	}
	if got := sink.resolutions(); len(got) != 0 {
		t.Fatalf("a live round reported %+v", got)
	}
	res.set(nil, ports.ErrResolverOutage)
	if r, _ := e.Must(e.Req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-1", "x"), -1)))); r.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("leased round %+v", r.Results[0])
	}
	got := sink.resolutions()
	want := event.ScopeResolutionFailed{Who: event.Who{Partition: "p1", ActorID: "alice", ClientID: "c1"},
		Operation: event.OperationSync, Outage: true, Leased: true}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("resolutions %+v, want %+v", got, want)
	}
}

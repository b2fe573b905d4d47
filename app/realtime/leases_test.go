package realtime_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/leases/memlease"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/domain/lease"
	domrt "github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

type outage struct{}

func (outage) ResolveScopes(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
	return nil, ports.ErrResolverOutage
}

// During a resolver outage a socket is registered from the client's auth
// lease (SPEC §7.3.3), as its sync rounds are authorized.
func TestAnOutageRegistersFromTheLease(t *testing.T) {
	ks, err := lease.NewKeySet(bytes.Repeat([]byte{1}, lease.MinKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := leases.New(leases.Options{Store: memlease.New(), Keys: ks, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Issue(context.Background(), "p", "b", "alice", scopes.Allowed{"owner": {"alice"}}); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, realtime.Options{Resolver: outage{}, Leases: svc})
	c, _ := f.connect(t, "alice", "b")
	f.st.commit("bob") // outside the leased grant: no delta
	f.publish(1)
	f.publish(f.st.commit("alice"))
	if m := c.next(t); !m.Binary || m.Data[0] != domrt.TagDelta {
		t.Fatalf("want the delta of the leased registration, got %s", m.Data)
	}
}

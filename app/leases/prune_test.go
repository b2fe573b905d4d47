package leases_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/leases/memlease"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

// TestPrunerCutoffs: a lease is kept one TTL past its expiry, a
// revocation no lease carries two TTLs past its stamp; a backlog larger
// than one pass goes in one run.
func TestPrunerCutoffs(t *testing.T) {
	ctx := context.Background()
	const ttl = 10 * time.Minute
	now := time.UnixMilli(100_000_000)
	st := memlease.NewWithClock(func() int64 { return now.UnixMilli() })
	put := func(client, id string, expires time.Time) {
		t.Helper()
		ok, err := st.PutLease(ctx, nil, lease.Stored{Record: lease.Record{Partition: "p", ClientID: client, LeaseID: id, ActorID: "a",
			AllowedScopes: scopes.Allowed{}, IssuedAtMs: expires.Add(-ttl).UnixMilli(), ExpiresAtMs: expires.UnixMilli()}, Signature: []byte("s")})
		if err != nil || !ok {
			t.Fatalf("put %s: %v %v", client, ok, err)
		}
	}
	for i := range 2500 {
		put(fmt.Sprint("old", i), fmt.Sprint("O", i), now.Add(-ttl-time.Millisecond))
	}
	put("recent", "R", now.Add(-ttl+time.Millisecond))
	now = now.Add(-2*ttl - time.Millisecond)
	if _, err := st.RevokeLease(ctx, "p", "stale"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Millisecond)
	if _, err := st.RevokeLease(ctx, "p", "fresh"); err != nil {
		t.Fatal(err)
	}
	now = time.UnixMilli(100_000_000)
	p, err := leases.NewPruner(st, ttl, func() time.Time { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Prune(ctx)
	if err != nil || n != (ports.LeasePruneCounts{Leases: 2500, Revocations: 1}) {
		t.Fatalf("prune: %+v %v", n, err)
	}
	if l, _ := st.GetLease(ctx, "p", "recent"); l == nil {
		t.Fatal("a lease expired less than a TTL ago was pruned")
	}
	if ok, _ := st.PutLease(ctx, nil, lease.Stored{Record: lease.Record{Partition: "p", ClientID: "x", LeaseID: "fresh", ExpiresAtMs: 1}}); ok {
		t.Fatal("the young revocation was pruned")
	}
}

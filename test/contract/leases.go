package contract

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

// LeaseHarness adapts one auth-lease store implementation to the lease
// suite.
type LeaseHarness struct {
	// New returns a fresh, empty store; the harness releases it.
	New func(t *testing.T) ports.LeaseStore
	// Reopen, when set, opens a second store over s's data the way a
	// restarted process would (persistent stores only).
	Reopen func(t *testing.T, s ports.LeaseStore) ports.LeaseStore
	// NewClocked, when set, returns a fresh store stamping revocations
	// with nowMs (the pruning case needs it).
	NewClocked func(t *testing.T, nowMs func() int64) ports.LeaseStore
}

// RunLeases runs the auth-lease store contract (SPEC §7.3.1, §7.3.4)
// against h. Groups: reads and writes (missing, round trip, insert-only
// first write, compare-and-set refresh), revocation (marking, the
// revocation list, idempotence, partitions apart, a revoked id never
// stored again, a refresh read before a revocation loses to it),
// concurrency (racing refreshes and a racing revocation), durability,
// pruning (expired leases, revocations no lease carries, bounded passes).
func RunLeases(t *testing.T, h LeaseHarness) {
	if h.New == nil {
		t.Fatal("contract: LeaseHarness.New is required")
	}
	cases := []struct {
		name string
		run  func(t *testing.T, h LeaseHarness)
	}{
		{"get_missing", leaseGetMissing},
		{"put_get_roundtrip", leaseRoundTrip},
		{"first_put_is_insert_only", leaseFirstPut},
		{"refresh_compares_and_sets", leaseRefreshCAS},
		{"revoke_marks_the_stored_lease", leaseRevokeMarks},
		{"revoke_is_idempotent_and_listed", leaseRevokeListed},
		{"revoked_id_is_never_stored_again", leaseRevokedNeverStored},
		{"refresh_read_before_revoke_loses", leaseStaleRefreshLoses},
		{"partitions_apart", leasePartitions},
		{"concurrent_refreshes", leaseConcurrentRefresh},
		{"concurrent_revoke", leaseConcurrentRevoke},
		{"reopen", leaseReopen},
		{"prune_expired_and_stale_revocations", leasePrune},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

func leaseRec(partition, client, id string, issued int64) lease.Stored {
	return lease.Stored{Record: lease.Record{
		Partition: partition, ClientID: client, LeaseID: id, ActorID: "actor-" + client,
		// Value order is kept as given (not sorted): the seal covers it.
		AllowedScopes: scopes.Allowed{"project_id": {"p2", "p1"}, "org_id": {"*"}},
		IssuedAtMs:    issued, ExpiresAtMs: issued + 900_000,
	}, Signature: []byte(fmt.Sprintf("seal %s %d \x00\xff", id, issued))}
}

func leaseGet(t *testing.T, s ports.LeaseStore, partition, client string) *lease.Stored {
	t.Helper()
	st, err := s.GetLease(context.Background(), partition, client)
	if err != nil {
		t.Fatalf("GetLease(%s, %s): %v", partition, client, err)
	}
	return st
}

func leasePut(t *testing.T, s ports.LeaseStore, prev *lease.Stored, next lease.Stored) bool {
	t.Helper()
	ok, err := s.PutLease(context.Background(), prev, next)
	if err != nil {
		t.Fatalf("PutLease: %v", err)
	}
	return ok
}

func leaseRevoke(t *testing.T, s ports.LeaseStore, partition, id string) bool {
	t.Helper()
	found, err := s.RevokeLease(context.Background(), partition, id)
	if err != nil {
		t.Fatalf("RevokeLease(%s, %s): %v", partition, id, err)
	}
	return found
}

func leaseEqual(t *testing.T, got *lease.Stored, want lease.Stored) {
	t.Helper()
	if got == nil {
		t.Fatalf("no lease stored, want %+v", want)
	}
	if !reflect.DeepEqual(got.Record, want.Record) || got.Revoked != want.Revoked || !bytes.Equal(got.Signature, want.Signature) {
		t.Fatalf("lease = %+v (revoked %v, sig %q), want %+v (revoked %v, sig %q)",
			got.Record, got.Revoked, got.Signature, want.Record, want.Revoked, want.Signature)
	}
}

func leaseGetMissing(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	if st := leaseGet(t, s, "p", "c"); st != nil {
		t.Fatalf("GetLease on an empty store = %+v", st)
	}
}

func leaseRoundTrip(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	r := leaseRec("p", "c", "L1", 1_000)
	if !leasePut(t, s, nil, r) {
		t.Fatal("first PutLease refused")
	}
	leaseEqual(t, leaseGet(t, s, "p", "c"), r)
	// An empty grant reads back as an empty map.
	e := leaseRec("p", "d", "L2", 1_000)
	e.AllowedScopes = scopes.Allowed{}
	leasePut(t, s, nil, e)
	leaseEqual(t, leaseGet(t, s, "p", "d"), e)
	// next.Revoked is ignored: a put stores an unrevoked lease.
	x := leaseRec("p", "x", "L3", 1_000)
	x.Revoked = true
	leasePut(t, s, nil, x)
	x.Revoked = false
	leaseEqual(t, leaseGet(t, s, "p", "x"), x)
}

func leaseFirstPut(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	first := leaseRec("p", "c", "L1", 1_000)
	leasePut(t, s, nil, first)
	if leasePut(t, s, nil, leaseRec("p", "c", "L2", 2_000)) {
		t.Fatal("a second insert replaced the stored lease")
	}
	leaseEqual(t, leaseGet(t, s, "p", "c"), first)
}

func leaseRefreshCAS(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	first := leaseRec("p", "c", "L1", 1_000)
	leasePut(t, s, nil, first)
	prev := leaseGet(t, s, "p", "c")
	slid := leaseRec("p", "c", "L1", 5_000)
	slid.AllowedScopes = scopes.Allowed{"project_id": {"p3"}}
	if !leasePut(t, s, prev, slid) {
		t.Fatal("a refresh of the lease read was refused")
	}
	leaseEqual(t, leaseGet(t, s, "p", "c"), slid)
	// prev is stale now: another refresh built on it is refused.
	if leasePut(t, s, prev, leaseRec("p", "c", "L1", 9_000)) {
		t.Fatal("a refresh built on a stale read replaced the lease")
	}
	leaseEqual(t, leaseGet(t, s, "p", "c"), slid)
	// A different id may replace the read lease (another actor's lease).
	cur := leaseGet(t, s, "p", "c")
	other := leaseRec("p", "c", "L9", 10_000)
	if !leasePut(t, s, cur, other) {
		t.Fatal("replacing the read lease with a new id was refused")
	}
	leaseEqual(t, leaseGet(t, s, "p", "c"), other)
}

func leaseRevokeMarks(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	r := leaseRec("p", "c", "L1", 1_000)
	leasePut(t, s, nil, r)
	if !leaseRevoke(t, s, "p", "L1") {
		t.Fatal("RevokeLease found no lease carrying the id")
	}
	r.Revoked = true
	leaseEqual(t, leaseGet(t, s, "p", "c"), r)
}

func leaseRevokeListed(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	leasePut(t, s, nil, leaseRec("p", "c", "L1", 1_000))
	leaseRevoke(t, s, "p", "L1")
	if !leaseRevoke(t, s, "p", "L1") {
		t.Fatal("a repeated revocation no longer finds the lease")
	}
	// An id no lease carries is listed all the same.
	if leaseRevoke(t, s, "p", "L-unknown") {
		t.Fatal("RevokeLease reported a lease for an unknown id")
	}
	if leasePut(t, s, nil, leaseRec("p", "d", "L-unknown", 2_000)) {
		t.Fatal("an id revoked before it was stored was stored")
	}
	if st := leaseGet(t, s, "p", "d"); st != nil {
		t.Fatalf("stored %+v", st)
	}
}

func leaseRevokedNeverStored(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	leasePut(t, s, nil, leaseRec("p", "c", "L1", 1_000))
	leaseRevoke(t, s, "p", "L1")
	revoked := leaseGet(t, s, "p", "c")
	if !revoked.Revoked {
		t.Fatal("not revoked")
	}
	// §7.3.4: sliding the revoked id is refused, even on the current read.
	if leasePut(t, s, revoked, leaseRec("p", "c", "L1", 2_000)) {
		t.Fatal("the revoked id was stored again")
	}
	// A fresh id replaces it, unrevoked.
	fresh := leaseRec("p", "c", "L2", 3_000)
	if !leasePut(t, s, revoked, fresh) {
		t.Fatal("a fresh id could not replace the revoked lease")
	}
	leaseEqual(t, leaseGet(t, s, "p", "c"), fresh)
}

func leaseStaleRefreshLoses(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	leasePut(t, s, nil, leaseRec("p", "c", "L1", 1_000))
	before := leaseGet(t, s, "p", "c")
	leaseRevoke(t, s, "p", "L1")
	// The refresh was computed from a read taken before the revocation.
	if leasePut(t, s, before, leaseRec("p", "c", "L1", 2_000)) {
		t.Fatal("a refresh read before the revocation cleared it")
	}
	if st := leaseGet(t, s, "p", "c"); !st.Revoked || st.LeaseID != "L1" {
		t.Fatalf("after the lost refresh: %+v revoked %v", st.Record, st.Revoked)
	}
}

func leasePartitions(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	a, b := leaseRec("pa", "c", "L1", 1_000), leaseRec("pb", "c", "L1", 1_000)
	b.ActorID = "someone else"
	leasePut(t, s, nil, a)
	leasePut(t, s, nil, b)
	leaseEqual(t, leaseGet(t, s, "pa", "c"), a)
	leaseEqual(t, leaseGet(t, s, "pb", "c"), b)
	leaseRevoke(t, s, "pa", "L1")
	leaseEqual(t, leaseGet(t, s, "pb", "c"), b)
	if !leasePut(t, s, leaseGet(t, s, "pb", "c"), leaseRec("pb", "c", "L1", 2_000)) {
		t.Fatal("a revocation in another partition blocked the id")
	}
}

func leaseConcurrentRefresh(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	leasePut(t, s, nil, leaseRec("p", "c", "L1", 0))
	const workers, rounds = 4, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[int64]bool{}
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range rounds {
				issued := int64(1 + w*rounds + i)
				for {
					prev, err := s.GetLease(ctx, "p", "c")
					if err != nil {
						errs <- err
						return
					}
					ok, err := s.PutLease(ctx, prev, leaseRec("p", "c", "L1", issued))
					if err != nil {
						errs <- err
						return
					}
					if ok {
						mu.Lock()
						won[issued] = true
						mu.Unlock()
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(won) != workers*rounds {
		t.Fatalf("%d refreshes stored, want %d", len(won), workers*rounds)
	}
	if st := leaseGet(t, s, "p", "c"); !won[st.IssuedAtMs] || st.LeaseID != "L1" {
		t.Fatalf("final lease %+v is none of the stored refreshes", st.Record)
	}
}

func leaseConcurrentRevoke(t *testing.T, h LeaseHarness) {
	s := h.New(t)
	leasePut(t, s, nil, leaseRec("p", "c", "L1", 0))
	ctx := context.Background()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		// Refresh the same id as fast as possible until told to stop.
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			prev, err := s.GetLease(ctx, "p", "c")
			if err != nil {
				done <- err
				return
			}
			if _, err := s.PutLease(ctx, prev, leaseRec("p", "c", "L1", i)); err != nil {
				done <- err
				return
			}
		}
	}()
	leaseRevoke(t, s, "p", "L1")
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Whatever the interleaving, the revocation holds.
	if st := leaseGet(t, s, "p", "c"); !st.Revoked {
		t.Fatalf("a racing refresh cleared the revocation: %+v", st.Record)
	}
}

func leaseReopen(t *testing.T, h LeaseHarness) {
	if h.Reopen == nil {
		t.Skip("in-process store: nothing outlives it")
	}
	s := h.New(t)
	a, b := leaseRec("p", "a", "La", 1_000), leaseRec("p", "b", "Lb", 1_000)
	leasePut(t, s, nil, a)
	leasePut(t, s, nil, b)
	leaseRevoke(t, s, "p", "Lb")
	leaseRevoke(t, s, "p", "L-listed")
	r := h.Reopen(t, s)
	leaseEqual(t, leaseGet(t, r, "p", "a"), a)
	b.Revoked = true
	leaseEqual(t, leaseGet(t, r, "p", "b"), b)
	if leasePut(t, r, nil, leaseRec("p", "z", "L-listed", 2_000)) {
		t.Fatal("the revocation list did not survive a reopen")
	}
}

// leasePrune: expired leases go, revoked or not; a revocation goes once
// it is old enough and no stored lease carries its id; a pass deletes at
// most its limit of each and says when more may remain.
func leasePrune(t *testing.T, h LeaseHarness) {
	if h.NewClocked == nil {
		t.Skip("the harness has no clocked store")
	}
	ctx := context.Background()
	var now atomic.Int64
	s := h.NewClocked(t, now.Load)
	now.Store(1_000)
	// leaseRec expires 900 000 ms after issue.
	leasePut(t, s, nil, leaseRec("p", "expired", "E1", 0))     // expires 900 000
	leasePut(t, s, nil, leaseRec("p", "revoked-old", "R1", 0)) // expires 900 000, revoked at 1 000
	leasePut(t, s, nil, leaseRec("p", "live", "A1", 500_000))  // expires 1 400 000
	leasePut(t, s, nil, leaseRec("p", "revoked-live", "R2", 500_000))
	leaseRevoke(t, s, "p", "R1")
	leaseRevoke(t, s, "p", "R2") // its lease lives on: the entry stays
	leaseRevoke(t, s, "p", "GONE")
	now.Store(2_000_000)
	leaseRevoke(t, s, "q", "YOUNG") // too young to prune
	q := ports.LeasePrune{ExpiredBeforeMs: 1_000_000, RevokedBeforeMs: 1_000_000, Limit: 100}
	n, err := s.PruneLeases(ctx, ports.LeasePrune{Limit: 0, ExpiredBeforeMs: q.ExpiredBeforeMs, RevokedBeforeMs: q.RevokedBeforeMs})
	if err != nil || n != (ports.LeasePruneCounts{}) {
		t.Fatalf("limit 0: %+v %v", n, err)
	}
	n, err = s.PruneLeases(ctx, q)
	if err != nil || n != (ports.LeasePruneCounts{Leases: 2, Revocations: 2}) {
		t.Fatalf("prune = %+v %v, want the 2 expired leases and the revocations of R1 and GONE", n, err)
	}
	for client, want := range map[string]bool{"expired": false, "revoked-old": false, "live": true, "revoked-live": true} {
		if got := leaseGet(t, s, "p", client) != nil; got != want {
			t.Errorf("lease of %s kept = %v, want %v", client, got, want)
		}
	}
	if st := leaseGet(t, s, "p", "revoked-live"); st == nil || !st.Revoked {
		t.Fatalf("the live revoked lease: %+v", st)
	}
	// R1's entry is gone with its lease, but R2's and YOUNG's remain:
	// storing them is still refused.
	for _, c := range []struct{ partition, id string }{{"p", "R2"}, {"q", "YOUNG"}} {
		if leasePut(t, s, nil, leaseRec(c.partition, "new-"+c.id, c.id, 2_000_000)) {
			t.Errorf("revoked id %s/%s stored after the prune", c.partition, c.id)
		}
	}
	// Bounded passes.
	for i := range 3 {
		leasePut(t, s, nil, leaseRec("p", fmt.Sprint("bulk", i), fmt.Sprint("B", i), 0))
	}
	q.Limit = 2
	if n, err = s.PruneLeases(ctx, q); err != nil || n.Leases != 2 || !n.MayHaveMore {
		t.Fatalf("bounded pass: %+v %v", n, err)
	}
	if n, err = s.PruneLeases(ctx, q); err != nil || n.Leases != 1 || n.MayHaveMore {
		t.Fatalf("last pass: %+v %v", n, err)
	}
}

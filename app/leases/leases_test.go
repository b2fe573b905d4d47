package leases_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/adapters/leases/memlease"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// resolver answers with grant, or err.
type resolver struct {
	grant scopes.Allowed
	err   error
}

func (r *resolver) ResolveScopes(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
	return r.grant.Clone(), r.err
}

var declared = map[string]bool{"project_id": true}

const ttl = 15 * time.Minute

type fixture struct {
	svc   *leases.Service
	store *memlease.Store
	clock *clock.Virtual
	m     *leases.Metrics
	ids   int
}

func keys(t *testing.T, seeds ...byte) *lease.KeySet {
	t.Helper()
	var ks [][]byte
	for _, s := range seeds {
		ks = append(ks, bytes.Repeat([]byte{s}, lease.MinKeyBytes))
	}
	set, err := lease.NewKeySet(ks...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func newFixture(t *testing.T, store *memlease.Store, ks *lease.KeySet) *fixture {
	t.Helper()
	f := &fixture{store: store, clock: clock.NewVirtual(1_000_000)}
	var err error
	if f.m, err = leases.NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	f.svc, err = leases.New(leases.Options{
		Store: store, Keys: ks, TTL: ttl, Now: f.clock.Now, Metrics: f.m,
		NewID: func() string { f.ids++; return fmt.Sprintf("lease-%d", f.ids) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var req = ports.ScopeRequest{Partition: "p", ActorID: "a", ClientID: "c"}

func TestResolveTellsLiveFailedAndOutage(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, memlease.New(), keys(t, 1))
	grant := scopes.Allowed{"project_id": {"p1"}}

	res, err := leases.Resolve(ctx, f.svc, &resolver{grant: grant}, req, declared)
	if err != nil || res.Outcome != leases.Live || !reflect.DeepEqual(res.Scopes.Allowed(), grant) {
		t.Fatalf("live: %+v, %v", res, err)
	}
	if _, err := leases.Resolve(ctx, f.svc, &resolver{grant: scopes.Allowed{"nope": {"x"}}}, req, declared); syncerr.CodeOf(err) != syncerr.InvalidSubscription {
		t.Fatalf("§3.2 an undeclared live key: %v", err)
	}
	boom := errors.New("grants database down")
	res, err = leases.Resolve(ctx, f.svc, &resolver{err: boom}, req, declared)
	if err != nil || res.Outcome != leases.Failed || res.Scopes.OK() || !errors.Is(res.Cause, boom) {
		t.Fatalf("§3.2 rule 5 a failure fails closed: %+v, %v", res, err)
	}
	hostErr := syncerr.New(syncerr.Forbidden)
	if _, err := leases.Resolve(ctx, f.svc, &resolver{err: hostErr}, req, declared); !errors.Is(err, hostErr) {
		t.Fatalf("a catalog error fails the request: %v", err)
	}
	// §7.3.3 an outage is never a failure: no lease yet → auth_lease_required.
	for _, outage := range []error{ports.ErrResolverOutage, fmt.Errorf("idp: %w", ports.ErrResolverOutage), &ports.OutageError{Cause: boom}} {
		if _, err := leases.Resolve(ctx, f.svc, &resolver{err: outage}, req, declared); syncerr.CodeOf(err) != syncerr.AuthLeaseRequired {
			t.Fatalf("outage %v without a lease: %v", outage, err)
		}
		// Leases off: the same, never a fail-closed resolution.
		if _, err := leases.Resolve(ctx, nil, &resolver{err: outage}, req, declared); syncerr.CodeOf(err) != syncerr.AuthLeaseRequired {
			t.Fatalf("outage %v with leases off: %v", outage, err)
		}
	}
}

func TestOutageRoundsAreServedFromTheLease(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, memlease.New(), keys(t, 1))
	grant := scopes.Allowed{"project_id": {"p1"}, "retired": {"x"}}
	issued, err := f.svc.Issue(ctx, "p", "c", "a", grant)
	if err != nil {
		t.Fatal(err)
	}
	if issued.LeaseID != "lease-1" || issued.ExpiresAtMs != f.clock.NowMs()+ttl.Milliseconds() {
		t.Fatalf("issued %+v", issued)
	}
	out := &resolver{err: ports.ErrResolverOutage}
	res, err := leases.Resolve(ctx, f.svc, out, req, declared)
	if err != nil || res.Outcome != leases.Leased || res.Lease.LeaseID != "lease-1" {
		t.Fatalf("§7.3.3 served: %+v, %v", res, err)
	}
	// The lease's grant, narrowed to what the schema declares.
	if !reflect.DeepEqual(res.Scopes.Allowed(), scopes.Allowed{"project_id": {"p1"}}) {
		t.Fatalf("leased scopes %v", res.Scopes.Allowed())
	}
	// Another actor on the same client id has no lease.
	if _, err := leases.Resolve(ctx, f.svc, out, ports.ScopeRequest{Partition: "p", ActorID: "b", ClientID: "c"}, declared); syncerr.CodeOf(err) != syncerr.AuthLeaseRequired {
		t.Fatalf("other actor: %v", err)
	}
	// An outage round does not refresh: the window ticks down.
	if st, _ := f.store.GetLease(ctx, "p", "c"); st.ExpiresAtMs != issued.ExpiresAtMs {
		t.Fatalf("an outage round moved the expiry to %d", st.ExpiresAtMs)
	}
	if _, err := f.clock.Advance(ttl.Milliseconds() - 1); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Resolve(ctx, f.svc, out, req, declared); err != nil {
		t.Fatalf("one millisecond before expiry: %v", err)
	}
	_, _ = f.clock.Advance(1)
	if _, err := leases.Resolve(ctx, f.svc, out, req, declared); syncerr.CodeOf(err) != syncerr.AuthLeaseRequired {
		t.Fatalf("§7.3.1 at expiresAtMs: %v", err)
	}
	for outcome, want := range map[string]float64{"served": 2, "other_actor": 1, "expired": 1, "no_lease": 0} {
		if got := leases.OutageRounds(f.m, outcome); got != want {
			t.Errorf("outage outcome %s = %v, want %v", outcome, got, want)
		}
	}
}

func TestRefreshSlidesAndRevocationSticks(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, memlease.New(), keys(t, 1))
	first, _ := f.svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p1"}})
	_, _ = f.clock.Advance(60_000)
	second, err := f.svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p2"}})
	if err != nil {
		t.Fatal(err)
	}
	if second.LeaseID != first.LeaseID || second.ExpiresAtMs != first.ExpiresAtMs+60_000 {
		t.Fatalf("§7.3.3 a refresh slides the same lease: %+v then %+v", first, second)
	}
	// The refresh re-captured the current grant.
	res, _ := leases.Resolve(ctx, f.svc, &resolver{err: ports.ErrResolverOutage}, req, declared)
	if !reflect.DeepEqual(res.Scopes.Allowed(), scopes.Allowed{"project_id": {"p2"}}) {
		t.Fatalf("leased scopes %v", res.Scopes.Allowed())
	}
	found, err := f.svc.Revoke(ctx, "p", first.LeaseID)
	if err != nil || !found {
		t.Fatalf("Revoke: %v %v", found, err)
	}
	if _, err := leases.Resolve(ctx, f.svc, &resolver{err: ports.ErrResolverOutage}, req, declared); syncerr.CodeOf(err) != syncerr.AuthLeaseRevoked {
		t.Fatalf("§7.3.4 revoked: %v", err)
	}
	// A live round mints a fresh id; the revoked one stays dead.
	third, err := f.svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p2"}})
	if err != nil || third.LeaseID == first.LeaseID {
		t.Fatalf("§7.3.4 after revocation: %+v, %v", third, err)
	}
	if _, err := leases.Resolve(ctx, f.svc, &resolver{err: ports.ErrResolverOutage}, req, declared); err != nil {
		t.Fatalf("the fresh lease serves: %v", err)
	}
	if i, r := leases.Issued(f.m, "issued"), leases.Issued(f.m, "refreshed"); i != 2 || r != 1 {
		t.Fatalf("issued %v, refreshed %v; want 2 and 1", i, r)
	}
	if _, err := f.svc.Revoke(ctx, "", "x"); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("Revoke without a partition: %v", err)
	}
}

func TestAnUnsealedLeaseIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	store := memlease.New()
	f := newFixture(t, store, keys(t, 1))
	rec, _ := f.svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p1"}})
	// Someone with write access to the store widens the grant.
	cur, _ := store.GetLease(ctx, "p", "c")
	forged := *cur
	forged.AllowedScopes = scopes.Allowed{"project_id": {"*"}}
	if ok, _ := store.PutLease(ctx, cur, forged); !ok {
		t.Fatal("forging failed")
	}
	if _, err := leases.Resolve(ctx, f.svc, &resolver{err: ports.ErrResolverOutage}, req, declared); syncerr.CodeOf(err) != syncerr.AuthLeaseRequired {
		t.Fatalf("a forged lease served: %v", err)
	}
	// The next live round replaces it under a fresh id.
	next, err := f.svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p1"}})
	if err != nil || next.LeaseID == rec.LeaseID {
		t.Fatalf("after a forged lease: %+v, %v", next, err)
	}
	if got := leases.SealFailures(f.m); got != 2 {
		t.Fatalf("seal failures = %v, want 2", got)
	}
}

func TestKeyRotationKeepsLeasesValid(t *testing.T) {
	ctx := context.Background()
	store := memlease.New()
	old := newFixture(t, store, keys(t, 1))
	rec, _ := old.svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p1"}})
	// The rotated server seals with key 2 and still verifies key 1.
	rotated := newFixture(t, store, keys(t, 2, 1))
	if _, err := rotated.svc.Authorize(ctx, "p", "c", "a"); err != nil {
		t.Fatalf("a lease sealed by the previous key: %v", err)
	}
	again, err := rotated.svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p1"}})
	if err != nil || again.LeaseID != rec.LeaseID {
		t.Fatalf("the refresh after a rotation keeps the id: %+v, %v", again, err)
	}
	// Re-sealed with the new key: a server holding only key 2 trusts it.
	only2 := newFixture(t, store, keys(t, 2))
	if _, err := only2.svc.Authorize(ctx, "p", "c", "a"); err != nil {
		t.Fatalf("re-sealed lease: %v", err)
	}
	if _, err := old.svc.Authorize(ctx, "p", "c", "a"); syncerr.CodeOf(err) != syncerr.AuthLeaseRequired {
		t.Fatalf("a server without the new key trusted its seal: %v", err)
	}
}

func TestNewRefusesAnIncompleteService(t *testing.T) {
	ks := keys(t, 1)
	for name, o := range map[string]leases.Options{
		"no store": {Keys: ks, TTL: time.Minute},
		"no keys":  {Store: memlease.New(), TTL: time.Minute},
		"no ttl":   {Store: memlease.New(), Keys: ks},
	} {
		if _, err := leases.New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRefreshIntervalSparesRewrites(t *testing.T) {
	ctx := context.Background()
	store := memlease.New()
	clk := clock.NewVirtual(5_000_000)
	m, _ := leases.NewMetrics(prometheus.NewRegistry())
	svc, err := leases.New(leases.Options{Store: store, Keys: keys(t, 1), TTL: ttl, Refresh: 30 * time.Second, Now: clk.Now, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	grant := scopes.Allowed{"project_id": {"p1"}}
	first, _ := svc.Issue(ctx, "p", "c", "a", grant)
	_, _ = clk.Advance(29_999)
	kept, err := svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p1"}})
	if err != nil || !reflect.DeepEqual(kept, first) {
		t.Fatalf("within the interval: %+v, want the stored %+v (%v)", kept, first, err)
	}
	// A changed grant is re-captured at once (§7.3.3).
	changed, _ := svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p2"}})
	if changed.IssuedAtMs != clk.NowMs() || changed.LeaseID != first.LeaseID {
		t.Fatalf("changed grant: %+v", changed)
	}
	_, _ = clk.Advance(30_000)
	slid, _ := svc.Issue(ctx, "p", "c", "a", scopes.Allowed{"project_id": {"p2"}})
	if slid.ExpiresAtMs != clk.NowMs()+ttl.Milliseconds() {
		t.Fatalf("past the interval the lease slides: %+v", slid)
	}
	if st, _ := store.GetLease(ctx, "p", "c"); st.ExpiresAtMs != slid.ExpiresAtMs {
		t.Fatalf("stored %+v", st.Record)
	}
	if k, r := leases.Issued(m, "kept"), leases.Issued(m, "refreshed"); k != 1 || r != 2 {
		t.Fatalf("kept %v refreshed %v, want 1 and 2", k, r)
	}
	if _, err := leases.New(leases.Options{Store: store, Keys: keys(t, 1), TTL: time.Minute, Refresh: 7 * time.Second}); err == nil {
		t.Fatal("a refresh past a tenth of the TTL was accepted")
	}
}

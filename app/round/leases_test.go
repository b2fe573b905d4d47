package round_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/leases/memlease"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// switchable is a resolver whose answer a test changes between rounds.
type switchable struct {
	mu    sync.Mutex
	grant scopes.Allowed
	err   error
}

func (s *switchable) set(grant scopes.Allowed, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grant, s.err = grant, err
}

func (s *switchable) ResolveScopes(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grant.Clone(), s.err
}

type leaseEnv struct {
	*roundtest.Env
	res   *switchable
	svc   *leases.Service
	nowMs *int64
}

func newLeaseEnv(t *testing.T, on bool) *leaseEnv {
	t.Helper()
	res := &switchable{grant: scopes.Allowed{"owner": {"alice"}, "project_id": {"p-1"}}}
	now := int64(1_700_000_000_000)
	clock := func() time.Time { return time.UnixMilli(now) }
	var svc *leases.Service
	if on {
		ks, err := lease.NewKeySet(bytes.Repeat([]byte{7}, lease.MinKeyBytes))
		if err != nil {
			t.Fatal(err)
		}
		if svc, err = leases.New(leases.Options{Store: memlease.New(), Keys: ks, TTL: 15 * time.Minute, Now: clock}); err != nil {
			t.Fatal(err)
		}
	}
	e := roundtest.New(t, func(o *roundtest.Options) {
		o.Round.Resolver, o.Round.Leases, o.Now = res, svc, clock
	})
	// The project every task below belongs to.
	seed, _ := e.Must(e.Req(ssptest.Commit("seed", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))))
	if seed.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("seed: %+v", seed.Results[0])
	}
	return &leaseEnv{Env: e, res: res, svc: svc, nowMs: &now}
}

func (e *leaseEnv) push(id, task string) (ssptest.Resp, error) {
	e.T.Helper()
	resp, _, err := e.Do(e.Req(ssptest.Commit(id, ssptest.Upsert("tasks", task, e.Task(task, "p-1", "title "+task), -1))))
	return resp, err
}

func TestLiveRoundsIssueAndSlideOneLease(t *testing.T) {
	e := newLeaseEnv(t, true)
	first, err := e.push("k1", "t-1")
	if err != nil {
		t.Fatal(err)
	}
	// §7.3.2: LEASE right after RESP_HEADER, before the first PUSH_RESULT.
	if _, ok := first.Msg.Frames[1].(*ssp2.Lease); !ok || first.Lease.LeaseID == "" {
		t.Fatalf("frames %v: want LEASE second", first.Msg.Frames)
	}
	if first.Lease.ExpiresAtMs != *e.nowMs+15*60_000 {
		t.Fatalf("§7.3.3 expiresAtMs = issuedAt + ttl: %d", first.Lease.ExpiresAtMs)
	}
	*e.nowMs += 60_000
	second, err := e.push("k2", "t-2")
	if err != nil {
		t.Fatal(err)
	}
	if second.Lease == nil || second.Lease.LeaseID != first.Lease.LeaseID || second.Lease.ExpiresAtMs != first.Lease.ExpiresAtMs+60_000 {
		t.Fatalf("§7.3.3 the refresh slides the same lease: %+v then %+v", first.Lease, second.Lease)
	}
}

func TestRoundsThatDoNotResolveLiveIssueNoLease(t *testing.T) {
	e := newLeaseEnv(t, true)
	// §3.2 rule 5: a failed resolver fails closed and issues nothing.
	e.res.set(nil, errors.New("grant database unreachable"))
	resp, err := e.push("k1", "t-1")
	if err != nil {
		t.Fatal(err)
	}
	roundtest.WantRejected(t, resp.Results[0], 0, string(syncerr.Forbidden))
	if resp.Lease != nil {
		t.Fatal("a failed resolver issued a lease")
	}
	// §1.6: a schema-floor round issues nothing.
	e.res.set(scopes.Allowed{"project_id": {"p-1"}}, nil)
	r := e.Req(ssptest.Commit("k2", ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-1", "x"), -1)))
	r.SchemaVersion++
	floor, _ := e.Must(r)
	if floor.Lease != nil || floor.Header.RequiredSchemaVersion.Value != e.Schema.Version {
		t.Fatalf("floor round: %+v", floor)
	}
	// An epoch-acquisition round resolves nothing and issues nothing.
	acq := ssptest.Req{ClientID: "c1", SchemaVersion: e.Schema.Version, NoEpoch: true, Pull: true}
	if resp, _ := e.Must(acq); resp.Lease != nil {
		t.Fatal("an epoch acquisition issued a lease")
	}
}

func TestOutageRoundsAreAuthorizedByTheLease(t *testing.T) {
	e := newLeaseEnv(t, true)
	held, err := e.push("k1", "t-1")
	if err != nil {
		t.Fatal(err)
	}
	e.res.set(nil, ports.ErrResolverOutage)
	// §7.3.3: the leased grant authorizes the write; no refresh.
	served, err := e.push("k2", "t-2")
	if err != nil {
		t.Fatalf("outage round: %v", err)
	}
	if served.Results[0].Status != ssp2.PushApplied || served.Lease != nil {
		t.Fatalf("outage round: %+v lease %+v", served.Results[0], served.Lease)
	}
	// §3.4 still applies against the leased map: another project is forbidden.
	other, _, err := e.Do(e.Req(ssptest.Commit("k3", ssptest.Upsert("tasks", "t-3", e.Task("t-3", "p-2", "x"), -1))))
	if err != nil {
		t.Fatal(err)
	}
	roundtest.WantRejected(t, other.Results[0], 0, string(syncerr.Forbidden))
	// Past the window the round fails request-level: nothing applied.
	*e.nowMs = held.Lease.ExpiresAtMs
	_, err = e.push("k4", "t-4")
	roundtest.WantCode(t, err, syncerr.AuthLeaseRequired)
	if _, ok, _ := e.Store.GetPushResult(context.Background(), "p1", "c1", "k4"); ok {
		t.Fatal("a refused outage round stored a push")
	}
	// The resolver is back: a live round slides the same lease again.
	e.res.set(scopes.Allowed{"owner": {"alice"}, "project_id": {"p-1"}}, nil)
	back, err := e.push("k4", "t-4")
	if err != nil || back.Lease == nil || back.Lease.LeaseID != held.Lease.LeaseID || back.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("recovered round: %+v, %v", back, err)
	}
}

func TestARevokedLeaseStopsOutageRounds(t *testing.T) {
	e := newLeaseEnv(t, true)
	held, err := e.push("k1", "t-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Revoke(context.Background(), "p1", held.Lease.LeaseID); err != nil {
		t.Fatal(err)
	}
	e.res.set(nil, ports.ErrResolverOutage)
	_, err = e.push("k2", "t-2")
	roundtest.WantCode(t, err, syncerr.AuthLeaseRevoked)
	e.res.set(scopes.Allowed{"owner": {"alice"}, "project_id": {"p-1"}}, nil)
	fresh, err := e.push("k2", "t-2")
	if err != nil || fresh.Lease == nil || fresh.Lease.LeaseID == held.Lease.LeaseID {
		t.Fatalf("§7.3.4 a live round after revocation mints a fresh id: %+v, %v", fresh.Lease, err)
	}
}

func TestLeasesOff(t *testing.T) {
	e := newLeaseEnv(t, false)
	resp, err := e.push("k1", "t-1")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Lease != nil {
		t.Fatal("§7.3.3 zero-config: a server without leases emitted LEASE")
	}
	// An outage is a request-level, retryable refusal, not a fail-closed
	// round (which would revoke subscriptions and make clients purge).
	e.res.set(nil, &ports.OutageError{Cause: errors.New("identity provider answered 503")})
	_, err = e.push("k2", "t-2")
	roundtest.WantCode(t, err, syncerr.AuthLeaseRequired)
	if !syncerr.Lookup(syncerr.CodeOf(err)).Retryable {
		t.Fatal("auth_lease_required is not retryable")
	}
}

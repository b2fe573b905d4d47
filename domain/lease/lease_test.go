package lease_test

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

func fresh(id string) func() string { return func() string { return id } }

func TestIssueSlidesTheSameLeaseOrMintsAFreshOne(t *testing.T) {
	allowed := scopes.Allowed{"project_id": {"p1"}}
	prev := &lease.Stored{Record: lease.Record{Partition: "p", ClientID: "c", LeaseID: "L1", ActorID: "a",
		AllowedScopes: scopes.Allowed{"project_id": {"p0"}}, IssuedAtMs: 10, ExpiresAtMs: 20}}
	revoked := *prev
	revoked.Revoked = true
	cases := []struct {
		name   string
		prev   *lease.Stored
		actor  string
		wantID string
	}{
		{"§7.3.3 first issuance mints an id", nil, "a", "L2"},
		{"§7.3.3 a refresh reuses the stable id", prev, "a", "L1"},
		{"§7.3.3 an expired lease of the actor still slides its id", prev, "a", "L1"},
		{"§7.3.4 a revoked id never resurrects", &revoked, "a", "L2"},
		{"§7.3 a lease is bound to its actor", prev, "b", "L2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := lease.Issue(c.prev, "p", "c", c.actor, allowed, 1000, time.Minute, fresh("L2"))
			want := lease.Record{Partition: "p", ClientID: "c", LeaseID: c.wantID, ActorID: c.actor,
				AllowedScopes: allowed, IssuedAtMs: 1000, ExpiresAtMs: 61_000}
			if !reflect.DeepEqual(r, want) {
				t.Fatalf("Issue = %+v, want %+v", r, want)
			}
		})
	}
}

func TestIssueCopiesTheAllowedMap(t *testing.T) {
	allowed := scopes.Allowed{"project_id": {"p1"}}
	r := lease.Issue(nil, "p", "c", "a", allowed, 0, time.Second, fresh("L"))
	allowed["project_id"][0] = "changed"
	if r.AllowedScopes["project_id"][0] != "p1" {
		t.Fatal("the record shares the caller's map")
	}
	if r := lease.Issue(nil, "p", "c", "a", nil, 0, time.Second, fresh("L")); r.AllowedScopes == nil {
		t.Fatal("a nil grant is stored as an empty map")
	}
}

func TestAuthorizeDuringAnOutage(t *testing.T) {
	live := &lease.Stored{Record: lease.Record{LeaseID: "L", ActorID: "a",
		AllowedScopes: scopes.Allowed{"project_id": {"p1"}}, IssuedAtMs: 0, ExpiresAtMs: 100}}
	revoked := *live
	revoked.Revoked = true
	cases := []struct {
		name    string
		st      *lease.Stored
		actor   string
		now     int64
		refused lease.Refused
		code    syncerr.Code
	}{
		{"§7.3.3 a valid lease of the actor authorizes", live, "a", 99, 0, ""},
		{"§7.3.3 no stored lease", nil, "a", 0, lease.NoLease, syncerr.AuthLeaseRequired},
		{"§7.3.3 another actor's lease", live, "b", 0, lease.OtherActor, syncerr.AuthLeaseRequired},
		{"§7.3.1 invalid at expiresAtMs", live, "a", 100, lease.Expired, syncerr.AuthLeaseRequired},
		{"§7.3.4 revoked", &revoked, "a", 0, lease.Revoked, syncerr.AuthLeaseRevoked},
		{"§7.3.4 revoked and expired says revoked", &revoked, "a", 500, lease.Revoked, syncerr.AuthLeaseRevoked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, refused := lease.Authorize(c.st, c.actor, c.now)
			if refused != c.refused {
				t.Fatalf("refused = %v, want %v", refused, c.refused)
			}
			if refused == 0 {
				if !reflect.DeepEqual(got, live.AllowedScopes) {
					t.Fatalf("allowed = %v", got)
				}
				return
			}
			if got != nil {
				t.Fatalf("a refusal returned scopes %v", got)
			}
			if refused.Code() != c.code || refused.Err().Code != c.code {
				t.Fatalf("code = %s / %s, want %s", refused.Code(), refused.Err().Code, c.code)
			}
			if e := syncerr.Lookup(c.code); !e.Retryable || e.Category != syncerr.CategoryAuthRequired {
				t.Fatalf("%s is not a retryable auth-required code", c.code)
			}
		})
	}
}

func TestNarrowDropsUndeclaredVariables(t *testing.T) {
	got := lease.Narrow(scopes.Allowed{"project_id": {"p1"}, "dropped": {"*"}}, map[string]bool{"project_id": true, "org": true})
	if !reflect.DeepEqual(got, scopes.Allowed{"project_id": {"p1"}}) {
		t.Fatalf("Narrow = %v", got)
	}
}

func key(b byte) []byte { return bytes.Repeat([]byte{b}, lease.MinKeyBytes) }

func TestKeySetSealsWithTheNewestAndVerifiesWithAny(t *testing.T) {
	r := lease.Record{Partition: "p", ClientID: "c", LeaseID: "L", ActorID: "a",
		AllowedScopes: scopes.Allowed{"b": {"2", "3"}, "a": {"1"}}, IssuedAtMs: 5, ExpiresAtMs: 9}
	old, err := lease.NewKeySet(key(1))
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := lease.NewKeySet(key(2), key(1))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := lease.NewKeySet(key(3))
	sigOld, sigNew := old.Sign(r), rotated.Sign(r)
	if bytes.Equal(sigOld, sigNew) {
		t.Fatal("the rotated set seals with its old key")
	}
	if !rotated.Verify(r, sigOld) || !rotated.Verify(r, sigNew) {
		t.Fatal("the rotated set refuses a seal of one of its keys")
	}
	if old.Verify(r, sigNew) || other.Verify(r, sigOld) {
		t.Fatal("a set verifies a seal of a key it does not hold")
	}
	// SetKeys swaps the keys in place; a refused set changes nothing.
	if err := old.SetKeys(key(2), key(1)); err != nil || !bytes.Equal(old.Sign(r), sigNew) || !old.Verify(r, sigOld) {
		t.Fatalf("after SetKeys: %v", err)
	}
	if err := old.SetKeys(make([]byte, 3)); err == nil || old.Len() != 2 {
		t.Fatalf("SetKeys(short) = %v, %d keys", err, old.Len())
	}
	// Every field is covered.
	tampered := []func(*lease.Record){
		func(r *lease.Record) { r.Partition = "q" },
		func(r *lease.Record) { r.ClientID = "d" },
		func(r *lease.Record) { r.LeaseID = "M" },
		func(r *lease.Record) { r.ActorID = "b" },
		func(r *lease.Record) { r.IssuedAtMs++ },
		func(r *lease.Record) { r.ExpiresAtMs++ },
		func(r *lease.Record) { r.AllowedScopes = scopes.Allowed{"a": {"1"}, "b": {"2", "*"}} },
		func(r *lease.Record) { r.AllowedScopes = scopes.Allowed{"a": {"1"}, "b": {"2", "3"}, "c": {}} },
		func(r *lease.Record) { r.AllowedScopes = scopes.Allowed{"a": {"1", "2"}, "b": {"3"}} },
		// Field boundaries are framed: moving bytes between fields changes the seal.
		func(r *lease.Record) { r.Partition, r.ClientID = "pc", "" },
	}
	for i, f := range tampered {
		c := r
		c.AllowedScopes = r.AllowedScopes.Clone()
		f(&c)
		if rotated.Verify(c, sigNew) {
			t.Fatalf("tampering %d still verifies", i)
		}
	}
	// Map order does not matter.
	c := r
	c.AllowedScopes = scopes.Allowed{"a": {"1"}, "b": {"2", "3"}}
	if !rotated.Verify(c, sigNew) {
		t.Fatal("the same record rebuilt does not verify")
	}
}

func TestNewKeySetRefusesWeakOrRepeatedKeys(t *testing.T) {
	for name, keys := range map[string][][]byte{
		"none":     nil,
		"short":    {make([]byte, lease.MinKeyBytes-1)},
		"repeated": {key(1), key(2), key(1)},
	} {
		if _, err := lease.NewKeySet(keys...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCurrentSparesARewriteWithinTheRefreshInterval(t *testing.T) {
	grant := scopes.Allowed{"project_id": {"p1", "p2"}}
	st := &lease.Stored{Record: lease.Record{LeaseID: "L", ActorID: "a", AllowedScopes: grant, IssuedAtMs: 1000, ExpiresAtMs: 901_000}}
	revoked := *st
	revoked.Revoked = true
	cases := []struct {
		name    string
		st      *lease.Stored
		actor   string
		allowed scopes.Allowed
		now     int64
		within  time.Duration
		want    bool
	}{
		{"issued just now, same grant", st, "a", grant, 1000, time.Second, true},
		{"the same grant in another order", st, "a", scopes.Allowed{"project_id": {"p2", "p1", "p1"}}, 1999, time.Second, true},
		{"the interval has passed", st, "a", grant, 2000, time.Second, false},
		{"issued in the future (clock moved back)", st, "a", grant, 999, time.Second, false},
		{"§7.3.3 a changed grant is re-captured", st, "a", scopes.Allowed{"project_id": {"p1"}}, 1000, time.Second, false},
		{"a variable more", st, "a", scopes.Allowed{"project_id": {"p1", "p2"}, "org": {"o"}}, 1000, time.Second, false},
		{"another actor", st, "b", grant, 1000, time.Second, false},
		{"revoked", &revoked, "a", grant, 1000, time.Second, false},
		{"nothing stored", nil, "a", grant, 1000, time.Second, false},
		{"within 0 rewrites every round", st, "a", grant, 1000, 0, false},
	}
	for _, c := range cases {
		if got := lease.Current(c.st, c.actor, c.allowed, c.now, c.within); got != c.want {
			t.Errorf("%s: Current = %v, want %v", c.name, got, c.want)
		}
	}
}

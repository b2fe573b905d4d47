// Package lease holds the rules of auth leases (SPEC §7.3): the lease
// record, the sliding issue and refresh, the outage authorization, and the
// signature the record carries at rest.
//
// A lease is keyed by (partition, clientId) and records the actor's
// resolved allowed scopes at issuance. A round whose resolver answered
// live issues or refreshes it (§7.3.3); a round whose resolver reported an
// outage is authorized against it, or fails request-level with
// sync.auth_lease_required or sync.auth_lease_revoked. Everything here is
// pure: the caller supplies the clock, fresh ids and the stored record.
package lease

import (
	"slices"
	"time"

	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// DefaultTTL is the reference lease window (15 minutes).
const DefaultTTL = 15 * time.Minute

// Record is the lease tuple of SPEC §7.3.1 with the key it is stored under.
type Record struct {
	Partition string
	ClientID  string
	// LeaseID is the server-chosen handle: stable across refreshes of the
	// pair, the revocation handle and the id the LEASE frame carries.
	LeaseID string
	// ActorID is the actor the lease authorizes.
	ActorID string
	// AllowedScopes is the actor's resolved allowed map at issuance.
	AllowedScopes scopes.Allowed
	IssuedAtMs    int64
	// ExpiresAtMs is IssuedAtMs + TTL; the lease is invalid at or after it.
	ExpiresAtMs int64
}

// Stored is a record as kept at rest.
type Stored struct {
	Record
	// Revoked is set by revocation (§7.3.4) and never cleared for the id.
	Revoked bool
	// Signature is the record's seal (KeySet.Sign); it never leaves the
	// server.
	Signature []byte
}

// ValidAt reports whether the lease is unexpired at nowMs (§7.3.1: valid
// iff now < expiresAtMs and not revoked; revocation is the caller's).
func (r Record) ValidAt(nowMs int64) bool { return nowMs < r.ExpiresAtMs }

// Issue returns the record a live-resolved round stores for (partition,
// clientID) (§7.3.3): the just-resolved allowed map, issued now, expiring
// after ttl. It slides the previous lease of the pair under the same id;
// a fresh id (newID) is minted when there is none, when the previous one
// was revoked (a revoked handle never resurrects, §7.3.4), or when it
// belonged to another actor (a lease is bound to its actor). prev is nil
// when nothing is stored, or when what is stored could not be trusted.
func Issue(prev *Stored, partition, clientID, actorID string, allowed scopes.Allowed, nowMs int64, ttl time.Duration, newID func() string) Record {
	id := ""
	if prev != nil && !prev.Revoked && prev.ActorID == actorID && prev.LeaseID != "" {
		id = prev.LeaseID
	} else {
		id = newID()
	}
	if allowed == nil {
		allowed = scopes.Allowed{}
	}
	return Record{
		Partition: partition, ClientID: clientID, LeaseID: id, ActorID: actorID,
		AllowedScopes: allowed.Clone(), IssuedAtMs: nowMs, ExpiresAtMs: nowMs + ttl.Milliseconds(),
	}
}

// Current reports whether st may answer a live round of actorID at nowMs
// as it is, without a rewrite: it is the actor's, unrevoked, issued less
// than within ago (and not in the future), with the same grant as allowed.
// A server that refreshes at most once per within keeps the window within
// that much of now + TTL and saves a write per round; within 0 rewrites
// on every round, the §7.3.3 sliding refresh to the millisecond.
func Current(st *Stored, actorID string, allowed scopes.Allowed, nowMs int64, within time.Duration) bool {
	if st == nil || st.Revoked || st.ActorID != actorID || within <= 0 {
		return false
	}
	age := nowMs - st.IssuedAtMs
	return age >= 0 && age < within.Milliseconds() && sameGrant(st.AllowedScopes, allowed)
}

// sameGrant compares two grants as sets of values per variable.
func sameGrant(a, b scopes.Allowed) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !sameValues(av, bv) {
			return false
		}
	}
	return true
}

func sameValues(a, b []string) bool {
	as, bs := slices.Clone(a), slices.Clone(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(slices.Compact(as), slices.Compact(bs))
}

// Refused is why an outage round cannot be served from the stored lease.
type Refused uint8

// Refusals, each with its request-level code.
const (
	// NoLease: nothing stored for the pair (or nothing trustworthy).
	NoLease Refused = iota + 1
	// OtherActor: the stored lease authorizes another actor.
	OtherActor
	// Revoked: the lease was revoked (sync.auth_lease_revoked).
	Revoked
	// Expired: the lease's window ended.
	Expired
)

var refusedNames = map[Refused]string{NoLease: "no_lease", OtherActor: "other_actor", Revoked: "revoked", Expired: "expired"}

func (r Refused) String() string { return refusedNames[r] }

// Code is the request-level catalog code of the refusal.
func (r Refused) Code() syncerr.Code {
	if r == Revoked {
		return syncerr.AuthLeaseRevoked
	}
	return syncerr.AuthLeaseRequired
}

// Err is the refusal as the request-level error the client sees.
func (r Refused) Err() *syncerr.Error {
	switch r {
	case Revoked:
		return syncerr.Newf(syncerr.AuthLeaseRevoked, "the auth lease of this client was revoked")
	case Expired:
		return syncerr.Newf(syncerr.AuthLeaseRequired, "live authorization is unavailable and the auth lease of this client expired")
	case OtherActor:
		return syncerr.Newf(syncerr.AuthLeaseRequired, "live authorization is unavailable and the auth lease of this client belongs to another actor")
	default:
		return syncerr.Newf(syncerr.AuthLeaseRequired, "live authorization is unavailable and this client holds no auth lease")
	}
}

// Authorize decides an outage round (§7.3.3) against the stored lease of
// the request's (partition, clientId): its allowed map when it is the
// actor's, unrevoked and unexpired at nowMs; otherwise the refusal. A
// revoked lease of the actor is Revoked whether or not it expired, the
// more specific answer. An outage round never refreshes the lease.
func Authorize(st *Stored, actorID string, nowMs int64) (scopes.Allowed, Refused) {
	switch {
	case st == nil:
		return nil, NoLease
	case st.ActorID != actorID:
		return nil, OtherActor
	case st.Revoked:
		return nil, Revoked
	case !st.ValidAt(nowMs):
		return nil, Expired
	}
	return st.AllowedScopes.Clone(), 0
}

// Narrow keeps the variables of allowed that the running schema declares.
// A lease captured under an older schema may name a variable a later
// version dropped; serving the rest narrows the grant, never widens it,
// where a live resolver answering such a key would be a server bug.
func Narrow(allowed scopes.Allowed, declared map[string]bool) scopes.Allowed {
	out := make(scopes.Allowed, len(allowed))
	for k, v := range allowed {
		if declared[k] {
			out[k] = v
		}
	}
	return out
}

// Package scopes holds the scope semantics of SPEC §3: validation of
// requested and resolved scope maps, the requested ∩ allowed intersection
// and its revocation rule, the matching predicate pulls filter by, stored
// scope extraction from a row, and write-path authorization.
//
// Every function here is pure: the host's resolver, the row codec and the
// storage stay behind their own seams, so the rules can be read (and
// tested) exactly as the spec states them.
package scopes

import (
	"fmt"
	"slices"
	"sort"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Wildcard is the allowed-scope value meaning "any value for this
// variable" (SPEC §3.2 rule 3). It is reserved for allowed scopes: a
// requested '*' fails the request.
const Wildcard = "*"

// Map is a scope map on the wire: variable → list of values. Requested
// and effective scopes have this shape (SPEC §0: scope values are always
// lists).
type Map map[string][]string

// Clone returns a deep copy of m.
func (m Map) Clone() Map {
	if m == nil {
		return nil
	}
	out := make(Map, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// Keys returns the map's variables in ascending order.
func (m Map) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Digest returns the §3.5 scope digest of an effective map: lowercase
// hex SHA-256 of its canonical JSON (keys sorted, values sorted unique).
// Segments are bound to it.
func (m Map) Digest() string { return canonjson.ScopeDigest(m) }

// Allowed is the host's grant for one actor: variable → values, where the
// value Wildcard admits any value. It covers every variable the actor
// holds across all tables (SPEC §3.2 rule 3). A variable absent from the
// map grants nothing.
type Allowed map[string][]string

// Allows reports whether the grant admits value for variable. An empty
// value is never admitted, not even by a wildcard (SPEC §3.4 step 2).
func (a Allowed) Allows(variable, value string) bool {
	if value == "" {
		return false
	}
	values, ok := a[variable]
	if !ok {
		return false
	}
	return slices.Contains(values, Wildcard) || slices.Contains(values, value)
}

// Clone returns a deep copy of a.
func (a Allowed) Clone() Allowed {
	if a == nil {
		return nil
	}
	out := make(Allowed, len(a))
	for k, v := range a {
		out[k] = slices.Clone(v)
	}
	return out
}

// Stored is a change's stored scopes: variable → the single value
// extracted from the row's scope column (SPEC §3.1).
type Stored map[string]string

// Resolution is the outcome of the one resolveScopes call a request makes
// (SPEC §3.2 rule 3, §3.4 step 1). Every subscription and every write of
// the request is decided against the same Resolution.
type Resolution struct {
	allowed Allowed
	ok      bool
}

// Granted is the Resolution of a resolver that returned allowed.
func Granted(allowed Allowed) Resolution { return Resolution{allowed: allowed, ok: true} }

// Failed is the Resolution of a resolver that failed. It fails closed:
// every subscription revokes and every write is forbidden.
func Failed() Resolution { return Resolution{} }

// OK reports whether the resolver returned a grant.
func (r Resolution) OK() bool { return r.ok }

// Allowed returns the grant; nil when the resolver failed.
func (r Resolution) Allowed() Allowed {
	if !r.ok {
		return nil
	}
	return r.allowed
}

// ValidateRequested checks one subscription's requested scopes against
// its table (SPEC §3.2 rule 2): every key must be a variable the table
// declares, and no value may be the wildcard. Either failure fails the
// whole request with sync.invalid_subscription.
func ValidateRequested(t *schema.Table, requested Map) error {
	for _, key := range requested.Keys() {
		// The request named these itself, so the message may say which.
		if _, ok := t.ScopeFor(key); !ok {
			msg := fmt.Sprintf("requested scope key %q is not declared by table %q", key, t.Name)
			return syncerr.Newf(syncerr.InvalidSubscription, "%s", msg).WithMessage(msg)
		}
		if slices.Contains(requested[key], Wildcard) {
			msg := fmt.Sprintf("requested scope %q carries '*', which only allowed scopes may hold", key)
			return syncerr.Newf(syncerr.InvalidSubscription, "%s", msg).WithMessage(msg)
		}
	}
	return nil
}

// ValidateAllowed checks a resolver's result against the union of
// variables declared by any table (SPEC §3.2 rule 3). A key no table
// declares is a server bug and fails the whole request with
// sync.invalid_subscription; keys declared only by other tables are legal.
func ValidateAllowed(declared map[string]bool, allowed Allowed) error {
	keys := make([]string, 0, len(allowed))
	for k := range allowed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !declared[k] {
			return syncerr.Newf(syncerr.InvalidSubscription,
				"resolved scope key %q is declared by no table", k)
		}
	}
	return nil
}

// Status is a subscription's scope status.
type Status uint8

// Subscription scope statuses (SPEC §3.2 rules 5–6).
const (
	StatusActive  Status = 1
	StatusRevoked Status = 2
)

// String returns "active" or "revoked".
func (s Status) String() string {
	switch s {
	case StatusActive:
		return "active"
	case StatusRevoked:
		return "revoked"
	}
	return "unknown"
}

// Outcome is the scope decision for one subscription.
type Outcome struct {
	Status Status
	// Effective is the map echoed in SUB_START: the intersection when
	// active, empty (non-nil) when revoked (SPEC §3.3).
	Effective Map
}

// Revoked reports whether the subscription is revoked; its SUB_START
// reason is then sync.scope_revoked.
func (o Outcome) Revoked() bool { return o.Status == StatusRevoked }

func revoked() Outcome { return Outcome{Status: StatusRevoked, Effective: Map{}} }

// Effective computes requested ∩ allowed per requested key (SPEC §3.2
// rule 4) and decides revocation (rule 5). requested must already have
// passed ValidateRequested.
//
// Per key: absent from allowed → excluded; allowed holds '*' → the
// requested values pass through; otherwise the values in both lists, in
// requested order. An empty result excludes the key. The subscription is
// revoked when the resolver failed, when any requested key was excluded,
// or when nothing is left.
func Effective(requested Map, res Resolution) Outcome {
	if !res.ok || len(requested) == 0 {
		return revoked()
	}
	eff := make(Map, len(requested))
	for key, want := range requested {
		granted, ok := res.allowed[key]
		if !ok {
			return revoked()
		}
		var values []string
		if slices.Contains(granted, Wildcard) {
			values = slices.Clone(want)
		} else {
			for _, v := range want {
				if slices.Contains(granted, v) {
					values = append(values, v)
				}
			}
		}
		if len(values) == 0 {
			return revoked()
		}
		eff[key] = values
	}
	return Outcome{Status: StatusActive, Effective: eff}
}

// Matches is the pull filter (SPEC §3.2): a change matches when, for
// every effective key, its stored value for that key is one of the
// effective values. Variables are independent dimensions.
func Matches(stored Stored, effective Map) bool {
	for key, values := range effective {
		v, ok := stored[key]
		if !ok || !slices.Contains(values, v) {
			return false
		}
	}
	return true
}

// AuthorizeWrite is write-path authorization (SPEC §3.4 steps 2–4) of an
// authorization row's scope values: the stored row for an update or a
// delete, the pushed payload plus primary key for an insert. Every
// variable the table declares must carry a non-empty value the grant
// admits; there is no partial pass. A failed resolver, a missing or empty
// value, or a value outside the grant is sync.forbidden.
func AuthorizeWrite(t *schema.Table, row Stored, res Resolution) error {
	if !res.ok {
		return syncerr.Newf(syncerr.Forbidden, "scope resolver failed; writes to %q are refused", t.Name)
	}
	for _, sc := range t.Scopes {
		v := row[sc.Variable]
		if v == "" {
			return syncerr.Newf(syncerr.Forbidden,
				"row of %q has no value for scope %q", t.Name, sc.Variable)
		}
		if !res.allowed.Allows(sc.Variable, v) {
			return syncerr.Newf(syncerr.Forbidden,
				"scope %q value is not granted for table %q", sc.Variable, t.Name)
		}
	}
	return nil
}

// IndexKeys returns the inverted-index scope keys of a change (SPEC §3.1:
// the pattern's literal prefix, ':', the stored value), in the table's
// declaration order. Variables without a stored value are skipped.
func IndexKeys(t *schema.Table, stored Stored) []string {
	keys := make([]string, 0, len(t.Scopes))
	for _, sc := range t.Scopes {
		if v, ok := stored[sc.Variable]; ok {
			keys = append(keys, sc.Key(v))
		}
	}
	return keys
}

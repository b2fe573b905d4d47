// Package limits holds the host's bounds on identifiers and request shape:
// how long an id or a scope value may be, how many scope values one
// subscription and how many subscriptions one request may carry. The
// protocol fixes none of them (every string is a u32-length str, every
// list a u32 count), so without them one request could store megabytes of
// id in every table that keys on it, or make the server plan thousands of
// subscriptions.
//
// Every identifier the server stores or echoes is checked on its way in —
// the identity an authenticator returns (actor, partition, the scopes its
// credential carries) and the ids and scope values of a request — so no
// stored value can later be one the response encoder refuses (a str must
// be well-formed UTF-8) or one an index cannot hold.
package limits

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Defaults: generous for any real client, small enough that a single id
// fits every index that keys on it (PostgreSQL's btree entries stop near
// 2.7 kB).
const (
	DefaultMaxIDBytes         = 256
	DefaultMaxScopeValueBytes = 1024
	DefaultMaxScopeValues     = 1000
	DefaultMaxSubscriptions   = 200
)

// Limits bound identifiers and request shape. A zero field means its default.
type Limits struct {
	// MaxIDBytes bounds, in bytes, the client id, every client commit id
	// and subscription id of a request, and the actor id and partition of
	// an identity.
	MaxIDBytes int
	// MaxScopeValueBytes bounds one scope value: requested by a
	// subscription, granted by a credential, or stored with a row.
	MaxScopeValueBytes int
	// MaxScopeValues bounds the scope values of one subscription, counted
	// over all its variables.
	MaxScopeValues int
	// MaxSubscriptions bounds the subscriptions of one request.
	MaxSubscriptions int
}

// Default returns the default limits.
func Default() Limits {
	return Limits{
		MaxIDBytes:         DefaultMaxIDBytes,
		MaxScopeValueBytes: DefaultMaxScopeValueBytes,
		MaxScopeValues:     DefaultMaxScopeValues,
		MaxSubscriptions:   DefaultMaxSubscriptions,
	}
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	d := Default()
	if l.MaxIDBytes == 0 {
		l.MaxIDBytes = d.MaxIDBytes
	}
	if l.MaxScopeValueBytes == 0 {
		l.MaxScopeValueBytes = d.MaxScopeValueBytes
	}
	if l.MaxScopeValues == 0 {
		l.MaxScopeValues = d.MaxScopeValues
	}
	if l.MaxSubscriptions == 0 {
		l.MaxSubscriptions = d.MaxSubscriptions
	}
	return l
}

// Identity checks what an authenticator returned: the actor and partition
// must be non-empty, well-formed UTF-8 without control characters and at
// most MaxIDBytes long; every variable and value of the credential's
// scopes (grant, nil for none) must be well-formed UTF-8, and every value
// at most MaxScopeValueBytes long. A failure is sync.auth_required: the
// credential does not name a usable identity (SPEC §1.1 puts identity in
// the host's authentication, whose failures are that code), and a fresh
// credential is the client's way out.
func (l Limits) Identity(actor, partition string, grant map[string][]string) error {
	l = l.WithDefaults()
	if err := l.id("actor id", actor); err != nil {
		return syncerr.Newf(syncerr.AuthRequired, "authenticator returned an unusable identity: %v", err)
	}
	if err := l.id("partition", partition); err != nil {
		return syncerr.Newf(syncerr.AuthRequired, "authenticator returned an unusable identity: %v", err)
	}
	for k, vs := range grant {
		if !utf8.ValidString(k) {
			return syncerr.Newf(syncerr.AuthRequired, "authenticator returned scopes with a variable that is not well-formed UTF-8")
		}
		for _, v := range vs {
			if err := l.scopeValue(v); err != nil {
				return syncerr.Newf(syncerr.AuthRequired, "authenticator returned scopes of %q: %v", k, err)
			}
		}
	}
	return nil
}

// Request checks the ids and shape of a decoded request before any of it
// is planned (the decoder already guarantees well-formed UTF-8 and
// non-empty ids):
//
//   - a client id longer than MaxIDBytes is sync.invalid_client_id (the
//     client cannot use it here and must pick another);
//   - a client commit id longer than MaxIDBytes, or more than
//     MaxSubscriptions subscriptions, is sync.invalid_request;
//   - a subscription id longer than MaxIDBytes, a scope value longer than
//     MaxScopeValueBytes, or more than MaxScopeValues values in one
//     subscription is sync.invalid_subscription.
func (l Limits) Request(hdr *ssp2.ReqHeader, commits []*ssp2.PushCommit, subs []*ssp2.Subscription) error {
	l = l.WithDefaults()
	if hdr != nil && len(hdr.ClientID) > l.MaxIDBytes {
		return syncerr.Newf(syncerr.InvalidClientID, "client id of %d bytes is longer than %d", len(hdr.ClientID), l.MaxIDBytes)
	}
	for i, c := range commits {
		if len(c.ClientCommitID) > l.MaxIDBytes {
			return syncerr.Newf(syncerr.InvalidRequest, "commit %d: client commit id of %d bytes is longer than %d",
				i, len(c.ClientCommitID), l.MaxIDBytes)
		}
	}
	if len(subs) > l.MaxSubscriptions {
		return syncerr.Newf(syncerr.InvalidRequest, "%d subscriptions: at most %d per request", len(subs), l.MaxSubscriptions)
	}
	for i, s := range subs {
		if len(s.ID) > l.MaxIDBytes {
			return syncerr.Newf(syncerr.InvalidSubscription, "subscription %d: id of %d bytes is longer than %d",
				i, len(s.ID), l.MaxIDBytes)
		}
		n := 0
		for _, e := range s.Scopes {
			n += len(e.Values)
			if n > l.MaxScopeValues {
				return syncerr.Newf(syncerr.InvalidSubscription, "subscription %q: more than %d scope values", s.ID, l.MaxScopeValues)
			}
			for _, v := range e.Values {
				if len(v) > l.MaxScopeValueBytes {
					return syncerr.Newf(syncerr.InvalidSubscription, "subscription %q: a value of %q has %d bytes, more than %d",
						s.ID, e.Key, len(v), l.MaxScopeValueBytes)
				}
			}
		}
	}
	return nil
}

// StoredScope checks a scope value a write would store with its row: a
// value no subscription may request (and that not every index can hold)
// is refused before it is written. The caller answers the failure as the
// operation's sync.invalid_request.
func (l Limits) StoredScope(variable, value string) error {
	l = l.WithDefaults()
	if err := l.scopeValue(value); err != nil {
		return syncerr.Newf(syncerr.InvalidRequest, "scope %q: %v", variable, err)
	}
	return nil
}

func (l Limits) id(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty %s", what)
	case len(s) > l.MaxIDBytes:
		return fmt.Errorf("%s of %d bytes is longer than %d", what, len(s), l.MaxIDBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not well-formed UTF-8", what)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s contains control character %U", what, r)
		}
	}
	return nil
}

func (l Limits) scopeValue(v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("a value is not well-formed UTF-8")
	}
	if len(v) > l.MaxScopeValueBytes {
		return fmt.Errorf("a value of %d bytes is longer than %d", len(v), l.MaxScopeValueBytes)
	}
	return nil
}

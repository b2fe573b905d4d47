package callout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// AuthOptions configure the Authenticator.
type AuthOptions struct {
	Client *Client
	// Timeout bounds one authenticate callout (--callout-timeout).
	Timeout time.Duration
	// ForwardHeaders are forwarded beside Authorization and Cookie
	// (--callout-forward-headers).
	ForwardHeaders []string
}

// Authenticator is ports.Authenticator for --auth callout: every request
// and socket upgrade asks BASE/authenticate who it is.
//
// The backend answers 200 with {"actorId", "partition", "scopes"?},
// 401 (sync.auth_required) or 403 (sync.forbidden). Anything else — no
// answer in time, no connection, another status, an answer that does not
// parse — is an outage, answered with the retryable sync.rate_limited:
// the credentials may be fine, so the client must neither refresh nor
// drop them (sync.auth_required would tell it to); it retries later.
type Authenticator struct {
	c       *Client
	cb      Callback
	forward []string
}

var _ ports.Authenticator = (*Authenticator)(nil)

// NewAuthenticator builds the authenticate callout.
func NewAuthenticator(o AuthOptions) (*Authenticator, error) {
	if o.Client == nil || o.Timeout <= 0 {
		return nil, errors.New("callout: authenticator needs a client and a timeout")
	}
	fwd := []string{"Authorization", "Cookie"}
	for _, h := range o.ForwardHeaders {
		h = http.CanonicalHeaderKey(strings.TrimSpace(h))
		if h != "" && !containsFold(fwd, h) {
			fwd = append(fwd, h)
		}
	}
	return &Authenticator{c: o.Client, cb: Callback{Name: "authenticate", Path: contract.PathAuthenticate, Timeout: o.Timeout}, forward: fwd}, nil
}

func containsFold(ss []string, s string) bool {
	for _, x := range ss {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// authRequest is the body of an authenticate callout.
type authRequest struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Query is the raw query string (a socket upgrade's clientId; a
	// browser's token, which it cannot send in a header).
	Query string `json:"query"`
	// ClientID is the request's client id when the transport request
	// carries it (a socket upgrade's clientId parameter); "" otherwise:
	// POST /sync names it in its body, read after authentication.
	ClientID string `json:"clientId"`
	// Headers are the forwarded headers present, by lowercase name.
	Headers map[string][]string `json:"headers"`
}

// authAnswer is the 200 answer.
type authAnswer struct {
	ActorID   string              `json:"actorId"`
	Partition string              `json:"partition"`
	Scopes    map[string][]string `json:"scopes"`
}

// clientIDParam is the query parameter a socket upgrade names its client
// id with (SPEC §8.1).
const clientIDParam = "clientId"

// Authenticate asks the backend who r is.
func (a *Authenticator) Authenticate(r *http.Request) (ports.Identity, error) {
	in := authRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		ClientID: r.URL.Query().Get(clientIDParam), Headers: map[string][]string{}}
	for _, h := range a.forward {
		if vs := r.Header.Values(h); len(vs) > 0 {
			in.Headers[strings.ToLower(h)] = vs
		}
	}
	var id ports.Identity
	err := a.c.Call(r.Context(), a.cb, in, func(status int, body []byte) (Outcome, error) {
		switch {
		case status == http.StatusUnauthorized:
			return OutcomeRefused, syncerr.Newf(syncerr.AuthRequired, "the authenticate callout answered 401")
		case status == http.StatusForbidden:
			return OutcomeRefused, syncerr.Newf(syncerr.Forbidden, "the authenticate callout answered 403")
		case !ok2xx(status):
			return unexpected(status)
		}
		var ans authAnswer
		if err := decodeStrict(body, &ans); err != nil {
			return OutcomeMalformed, err
		}
		if ans.ActorID == "" || ans.Partition == "" {
			return OutcomeMalformed, errors.New(`answer lacks "actorId" or "partition"`)
		}
		grant, err := grantOf(ans.Scopes)
		if err != nil {
			return OutcomeMalformed, err
		}
		id = ports.Identity{ActorID: ans.ActorID, Partition: ans.Partition, Scopes: grant}
		return OutcomeOK, nil
	})
	var o *Outage
	if errors.As(err, &o) {
		return ports.Identity{}, syncerr.Wrap(syncerr.RateLimited, err).
			WithMessage("authentication backend unavailable; retry later")
	}
	return id, err
}

// grantOf checks a scopes member: variable → list of strings, no null
// list. An absent member grants nothing (nil).
func grantOf(m map[string][]string) (scopes.Allowed, error) {
	if m == nil {
		return nil, nil
	}
	for k, vs := range m {
		if vs == nil {
			return nil, fmt.Errorf("scopes of %q: want a list of strings, not null", k)
		}
	}
	return scopes.Allowed(m), nil
}

// IdentityScopes is the ScopeResolver of --auth callout with --scopes
// auth: the grant the authenticate answer carried, read back from the
// request's identity (a missing "scopes" grants nothing).
type IdentityScopes struct{}

var _ ports.ScopeResolver = IdentityScopes{}

// ResolveScopes returns the identity's grant. Without the request's
// identity in ctx it fails, which revokes rather than widens.
func (IdentityScopes) ResolveScopes(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	id, ok := ports.IdentityFrom(ctx)
	if !ok || id.ActorID != req.ActorID || id.Partition != req.Partition {
		return nil, errors.New("callout identity scopes: the request's identity is not in context")
	}
	if id.Scopes == nil {
		return scopes.Allowed{}, nil
	}
	return id.Scopes.Clone(), nil
}

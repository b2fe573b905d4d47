// Package dev is the development identity adapter: it trusts whatever
// actor, partition and scopes the request claims. It exists so a local
// server can be driven with curl and test clients without an identity
// provider; it must never face untrusted traffic, which is why the server
// enables it only on explicit request and logs Warning when it does.
//
// Request inputs, first match wins:
//
//	actor      header X-Syncd-Actor,     query "actor",     Options.DefaultActor
//	partition  header X-Syncd-Partition, query "partition", Options.DefaultPartition, "default"
//	scopes     header X-Syncd-Scopes: a JSON object, variable → list of strings
//
// The Authenticator parses the scopes header onto Identity.Scopes; the
// Resolver reads it back from the request context (ports.IdentityFrom), so
// the grant travels with the identity rather than through a side channel.
// Without the header the Resolver grants every value of every declared
// variable.
package dev

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Request inputs read by the Authenticator.
const (
	HeaderActor     = "X-Syncd-Actor"
	HeaderPartition = "X-Syncd-Partition"
	HeaderScopes    = "X-Syncd-Scopes"
	QueryActor      = "actor"
	QueryPartition  = "partition"
)

// DefaultPartition is the partition of requests that name none.
const DefaultPartition = "default"

// Warning is the message the server logs when development identity is on.
const Warning = "development authentication is enabled: requests choose their own actor, partition and scopes; never expose this server to untrusted clients"

// maxScopesHeader bounds the scopes header a request may send.
const maxScopesHeader = 64 << 10

// Options configure the development Authenticator.
type Options struct {
	// DefaultActor is the actor of requests that name none (--dev-actor).
	// Empty means such requests fail with sync.auth_required.
	DefaultActor string
	// DefaultPartition is the partition of requests that name none
	// (--dev-partition); empty means DefaultPartition.
	DefaultPartition string
}

// Authenticator trusts the request's own claims. It implements
// ports.Authenticator.
type Authenticator struct {
	defaultActor     string
	defaultPartition string
}

var _ ports.Authenticator = (*Authenticator)(nil)

// NewAuthenticator builds a development Authenticator.
func NewAuthenticator(opts Options) (*Authenticator, error) {
	if strings.TrimSpace(opts.DefaultActor) != opts.DefaultActor {
		return nil, fmt.Errorf("dev auth: default actor %q has surrounding spaces", opts.DefaultActor)
	}
	p := opts.DefaultPartition
	if p == "" {
		p = DefaultPartition
	}
	if strings.TrimSpace(p) != p {
		return nil, fmt.Errorf("dev auth: default partition %q has surrounding spaces", p)
	}
	return &Authenticator{defaultActor: opts.DefaultActor, defaultPartition: p}, nil
}

// Authenticate returns the identity the request claims.
func (a *Authenticator) Authenticate(r *http.Request) (ports.Identity, error) {
	q := r.URL.Query()
	actor := first(r.Header.Get(HeaderActor), q.Get(QueryActor), a.defaultActor)
	if actor == "" {
		return ports.Identity{}, syncerr.Newf(syncerr.AuthRequired,
			"dev auth: no actor (header %s or query %q)", HeaderActor, QueryActor)
	}
	partition := first(r.Header.Get(HeaderPartition), q.Get(QueryPartition), a.defaultPartition)
	id := ports.Identity{ActorID: actor, Partition: partition}
	if raw, ok := r.Header[http.CanonicalHeaderKey(HeaderScopes)]; ok {
		allowed, err := ParseScopes(strings.Join(raw, ","))
		if err != nil {
			return ports.Identity{}, syncerr.Wrap(syncerr.AuthRequired, fmt.Errorf("dev auth: header %s: %w", HeaderScopes, err))
		}
		id.Scopes = allowed
	}
	return id, nil
}

// ParseScopes parses a scopes header value: a JSON object mapping each
// variable to a list of strings ("*" admits any value). It returns a
// non-nil map, empty for "{}".
func ParseScopes(s string) (scopes.Allowed, error) {
	if len(s) > maxScopesHeader {
		return nil, fmt.Errorf("longer than %d bytes", maxScopesHeader)
	}
	var m map[string][]string
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("want a JSON object of string lists: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	if m == nil {
		return nil, fmt.Errorf("want a JSON object, got null")
	}
	out := make(scopes.Allowed, len(m))
	for k, v := range m {
		if k == "" {
			return nil, fmt.Errorf("empty scope variable")
		}
		if v == nil {
			v = []string{}
		}
		out[k] = v
	}
	return out, nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// ResolverOptions configure the development Resolver.
type ResolverOptions struct {
	// Variables are the scope variables the schema declares (the union
	// over every table, e.g. schema.Schema.ScopeVariables()). Requests
	// without a scopes header are granted "*" for each.
	Variables map[string]bool
}

// Resolver grants what the development Authenticator put on the identity.
// It implements ports.ScopeResolver.
type Resolver struct {
	all scopes.Allowed
}

var _ ports.ScopeResolver = (*Resolver)(nil)

// NewResolver builds a development Resolver.
func NewResolver(opts ResolverOptions) (*Resolver, error) {
	vars := make([]string, 0, len(opts.Variables))
	for v, ok := range opts.Variables {
		if ok {
			vars = append(vars, v)
		}
	}
	sort.Strings(vars)
	all := make(scopes.Allowed, len(vars))
	for _, v := range vars {
		all[v] = []string{scopes.Wildcard}
	}
	return &Resolver{all: all}, nil
}

// ResolveScopes returns the scopes header parsed by the Authenticator, or
// every value of every declared variable when the request sent none. The
// identity in ctx must match the request, else the grant is refused.
func (r *Resolver) ResolveScopes(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	id, ok := ports.IdentityFrom(ctx)
	if ok && (id.ActorID != req.ActorID || id.Partition != req.Partition) {
		return nil, fmt.Errorf("dev resolver: identity in context does not match the request")
	}
	if !ok || id.Scopes == nil {
		return r.all.Clone(), nil
	}
	return id.Scopes.Clone(), nil
}

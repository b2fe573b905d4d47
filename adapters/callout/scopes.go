package callout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

// DefaultMaxCachedScopes bounds the scope cache's entries.
const DefaultMaxCachedScopes = 100_000

// ScopesOptions configure the ScopeResolver.
type ScopesOptions struct {
	Client *Client
	// Timeout bounds one resolve-scopes callout (--callout-timeout).
	Timeout time.Duration
	// TTL keeps an answer per (partition, actor) this long
	// (--callout-scopes-ttl; 0: every resolution asks).
	TTL time.Duration
	// MaxEntries bounds the cache (default DefaultMaxCachedScopes).
	MaxEntries int
	// Now is the clock the TTL runs on.
	Now func() time.Time
}

// ScopeResolver is ports.ScopeResolver for --scopes callout: the actor's
// grant comes from BASE/resolve-scopes, whatever --auth identified it.
//
// Answers are cached per (partition, actor) for the TTL, so a revocation
// takes effect within it; InvalidateScopes (POST
// /admin/realtime/refresh-scopes) drops them at once. Concurrent misses
// of one key share one callout. A callout without a usable answer is
// ports.ErrResolverOutage (as *ports.OutageError): the request is served
// from the client's auth lease (SPEC §7.3.3) and nothing is revoked. An
// outage is not cached, and a cached answer is not served past its TTL
// during one: the lease is the outage path.
type ScopeResolver struct {
	c   *Client
	cb  Callback
	ttl time.Duration
	max int
	now func() time.Time

	flights singleflight.Group
	mu      sync.Mutex
	cache   map[scopeKey]cachedScopes
	// gen counts invalidations: an answer asked for before one is not
	// kept, and a resolution after one does not wait for it.
	gen uint64
}

var (
	_ ports.ScopeResolver    = (*ScopeResolver)(nil)
	_ ports.ScopeInvalidator = (*ScopeResolver)(nil)
)

type scopeKey struct{ partition, actor string }

type cachedScopes struct {
	grant   scopes.Allowed
	expires time.Time
}

// NewScopeResolver builds the resolve-scopes callout.
func NewScopeResolver(o ScopesOptions) (*ScopeResolver, error) {
	if o.Client == nil || o.Timeout <= 0 || o.Now == nil || o.TTL < 0 {
		return nil, errors.New("callout: scope resolver needs a client, a timeout, a clock and a TTL of 0 or more")
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxCachedScopes
	}
	return &ScopeResolver{c: o.Client, cb: Callback{Name: "resolve-scopes", Path: contract.PathResolveScopes, Timeout: o.Timeout},
		ttl: o.TTL, max: o.MaxEntries, now: o.Now, cache: map[scopeKey]cachedScopes{}}, nil
}

// scopesRequest is the body of a resolve-scopes callout.
type scopesRequest struct {
	ActorID   string `json:"actorId"`
	Partition string `json:"partition"`
	// ClientID is "" where a request names none (segment and blob
	// downloads); the answer is cached per actor, so it must not depend
	// on it.
	ClientID string `json:"clientId"`
}

type scopesAnswer struct {
	Scopes *map[string][]string `json:"scopes"`
}

// ResolveScopes returns the actor's grant, from the cache or the backend.
func (r *ScopeResolver) ResolveScopes(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	key := scopeKey{req.Partition, req.ActorID}
	if g, ok := r.cached(key); ok {
		return g.Clone(), nil
	}
	r.mu.Lock()
	gen := r.gen
	r.mu.Unlock()
	// The shared callout outlives a caller that goes away (its own
	// timeout still bounds it), so the callers waiting on it are not
	// failed by another's cancellation.
	v, err, _ := r.flights.Do(fmt.Sprintf("%d\x00%s\x00%s", gen, req.Partition, req.ActorID), func() (any, error) {
		g, err := r.ask(context.WithoutCancel(ctx), req)
		if err == nil {
			r.keep(key, g, gen)
		}
		return g, err
	})
	if err != nil {
		return nil, &ports.OutageError{Cause: err}
	}
	return v.(scopes.Allowed).Clone(), nil
}

func (r *ScopeResolver) ask(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	var grant scopes.Allowed
	err := r.c.Call(ctx, r.cb, scopesRequest{ActorID: req.ActorID, Partition: req.Partition, ClientID: req.ClientID},
		func(status int, body []byte) (Outcome, error) {
			if !ok2xx(status) {
				return unexpected(status)
			}
			var ans scopesAnswer
			if err := decodeStrict(body, &ans); err != nil {
				return OutcomeMalformed, err
			}
			if ans.Scopes == nil {
				return OutcomeMalformed, errors.New(`answer lacks "scopes"`)
			}
			g, err := grantOf(*ans.Scopes)
			if err != nil {
				return OutcomeMalformed, err
			}
			grant = g
			if grant == nil {
				grant = scopes.Allowed{}
			}
			return OutcomeOK, nil
		})
	return grant, err
}

func (r *ScopeResolver) cached(key scopeKey) (scopes.Allowed, bool) {
	if r.ttl <= 0 {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.cache[key]
	if !ok {
		return nil, false
	}
	if !r.now().Before(e.expires) {
		delete(r.cache, key)
		return nil, false
	}
	return e.grant, true
}

// keep caches an answer asked for at generation gen, unless an
// invalidation came since.
func (r *ScopeResolver) keep(key scopeKey, g scopes.Allowed, gen uint64) {
	if r.ttl <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		return
	}
	now := r.now()
	if len(r.cache) >= r.max {
		r.evict(now)
	}
	r.cache[key] = cachedScopes{grant: g, expires: now.Add(r.ttl)}
}

// evict makes room: the expired entries go, and when none had expired,
// an arbitrary one (the cache is a bound on memory, not a store).
func (r *ScopeResolver) evict(now time.Time) {
	n := len(r.cache)
	for k, e := range r.cache {
		if !now.Before(e.expires) {
			delete(r.cache, k)
		}
	}
	if len(r.cache) < n {
		return
	}
	for k := range r.cache {
		delete(r.cache, k)
		return
	}
}

// InvalidateScopes drops the cached grant of actorID in partition (of
// every actor of the partition when actorID is ""), and any answer being
// asked for now, so the next resolution asks the backend.
func (r *ScopeResolver) InvalidateScopes(partition, actorID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	for k := range r.cache {
		if k.partition == partition && (actorID == "" || k.actor == actorID) {
			delete(r.cache, k)
		}
	}
}

// Package granttable is the identity of a conformance test instance: the
// actor is named by the request itself (header x-actor, or the actor query
// parameter on a WebSocket upgrade), the partition is fixed, and scopes
// come only from a grant table the harness fills. An actor never granted
// holds no scopes at all, unlike development auth, which grants "*".
//
// It authenticates nobody: it exists only behind the loopback test-control
// listener.
package granttable

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Where the actor is read.
const (
	HeaderActor = "X-Actor"
	QueryActor  = "actor"
)

// Authenticator names the actor from the request and binds it to one
// partition.
type Authenticator struct {
	Partition string
}

var _ ports.Authenticator = Authenticator{}

// Authenticate returns the request's actor in the instance partition; a
// request naming no actor is sync.auth_required.
func (a Authenticator) Authenticate(r *http.Request) (ports.Identity, error) {
	actor := r.Header.Get(HeaderActor)
	if actor == "" {
		actor = r.URL.Query().Get(QueryActor)
	}
	if actor == "" {
		return ports.Identity{}, syncerr.Newf(syncerr.AuthRequired, "no actor (header %s or query %q)", HeaderActor, QueryActor)
	}
	return ports.Identity{ActorID: actor, Partition: a.Partition}, nil
}

// ErrResolverFailing is what the resolver answers while SetFailing(true):
// an ordinary error, so the request fails closed (writes forbidden,
// subscriptions revoked) exactly as a thrown host resolver would.
var ErrResolverFailing = errors.New("granttable: scope resolution failing on request")

// ErrResolverOutage is what the resolver answers while SetOutage(true):
// the outage signal of SPEC §7.3.3, so rounds are authorized against the
// client's auth lease.
var ErrResolverOutage = &ports.OutageError{Cause: errors.New("granttable: live authorization unavailable on request")}

// Table is the grant table: actor → allowed scopes.
type Table struct {
	mu      sync.RWMutex
	grants  map[string]scopes.Allowed
	failing bool
	outage  bool
}

var _ ports.ScopeResolver = (*Table)(nil)

// NewTable returns an empty grant table.
func NewTable() *Table { return &Table{grants: map[string]scopes.Allowed{}} }

// Set replaces the grant of actor ("*" admits any value of a variable).
func (t *Table) Set(actor string, allowed scopes.Allowed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if allowed == nil {
		allowed = scopes.Allowed{}
	}
	t.grants[actor] = allowed.Clone()
}

// SetFailing makes every resolution fail (true) or answer again (false).
func (t *Table) SetFailing(failing bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failing = failing
}

// SetOutage makes every resolution report an outage (true) or answer
// again (false). A failing table fails rather than reporting the outage.
func (t *Table) SetOutage(outage bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outage = outage
}

// ResolveScopes returns the actor's grant; an actor never set gets an
// empty grant.
func (t *Table) ResolveScopes(_ context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.failing {
		return nil, ErrResolverFailing
	}
	if t.outage {
		return nil, ErrResolverOutage
	}
	if g, ok := t.grants[req.ActorID]; ok {
		return g.Clone(), nil
	}
	return scopes.Allowed{}, nil
}

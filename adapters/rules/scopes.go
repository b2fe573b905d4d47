package rules

import (
	"context"
	"errors"
	"fmt"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

// scopeResolver computes an actor's allowed scopes with the scopes rule,
// from the claims the authenticator verified (ports.Identity.Claims),
// the actor, the partition and the client id.
type scopeResolver struct {
	r    *Rules
	rule evaluable
}

var _ ports.ScopeResolver = (*scopeResolver)(nil)

// ResolveScopes implements ports.ScopeResolver. It reads the claims of
// the identity the transport stored in ctx, and fails (closed) when ctx
// carries none for the request's actor and partition, as the JWT
// resolver does. A rule that fails is an ordinary error too: the rule
// cannot decide, so nothing is granted.
func (s *scopeResolver) ResolveScopes(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	id, ok := ports.IdentityFrom(ctx)
	if !ok {
		return nil, errors.New("rules resolver: no authenticated identity in context")
	}
	if id.ActorID != req.ActorID || id.Partition != req.Partition {
		return nil, errors.New("rules resolver: identity in context does not match the request")
	}
	claims := id.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	act := &activation{claims: claims, actor: types.String(req.ActorID),
		partition: types.String(req.Partition), clientID: types.String(req.ClientID)}
	out, err := s.rule.eval(ctx, act)
	if err == nil {
		var allowed scopes.Allowed
		if allowed, err = toAllowed(out); err == nil {
			return allowed, nil
		}
	}
	return nil, s.r.failed(ctx, &s.rule, req.Partition, err)
}

// toAllowed reads the scopes rule's answer: a map of string lists.
func toAllowed(v ref.Val) (scopes.Allowed, error) {
	m, ok := v.(traits.Mapper)
	if !ok {
		return nil, fmt.Errorf("the scopes rule gave a %s, not a map", v.Type().TypeName())
	}
	out := scopes.Allowed{}
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		name, ok := k.(types.String)
		if !ok || name == "" {
			return nil, fmt.Errorf("the scopes rule gave a %s key, not a scope variable name", k.Type().TypeName())
		}
		l, ok := m.Get(k).(traits.Lister)
		if !ok {
			return nil, fmt.Errorf("scope %q: want a list of strings", string(name))
		}
		values := []string{}
		for li := l.Iterator(); li.HasNext() == types.True; {
			s, ok := li.Next().(types.String)
			if !ok {
				return nil, fmt.Errorf("scope %q: want a list of strings", string(name))
			}
			values = append(values, string(s))
		}
		out[string(name)] = values
	}
	return out, nil
}

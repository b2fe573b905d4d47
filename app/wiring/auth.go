package wiring

import (
	"errors"
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"

	devauth "github.com/syncd-dev/syncd/adapters/auth/dev"
	jwtauth "github.com/syncd-dev/syncd/adapters/auth/jwt"
	"github.com/syncd-dev/syncd/adapters/callout"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// AuthParams are the inputs of NewAuth.
type AuthParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Schema    *schema.Schema
	Log       *zap.Logger
	Clock     platform.Clock
	// RulesScopes is the scopes rule of --rules, if any (--scopes rules).
	RulesScopes ports.ScopeResolver `name:"syncd.rules_scopes" optional:"true"`
	// The callout adapters (CalloutModule), when --auth callout and
	// --scopes callout ask for them.
	CalloutAuth   *callout.Authenticator `optional:"true"`
	CalloutScopes *callout.ScopeResolver `optional:"true"`
}

// AuthResult provides the identity ports.
type AuthResult struct {
	fx.Out
	Authenticator ports.Authenticator
	Resolver      ports.ScopeResolver
}

// NewAuth builds the authenticator --auth selects and the scope resolver
// --scopes selects. --scopes auth (the default) takes the grant --auth
// gives: dev grants every declared scope variable unless the request
// narrows it, jwt the token's scopes claim, callout the authenticate
// answer's scopes. --scopes callout asks the backend of --callout-url
// whatever --auth identified the request.
func NewAuth(p AuthParams) (AuthResult, error) {
	r, err := authByMode(p)
	if err != nil {
		return AuthResult{}, err
	}
	switch p.Config.Scopes {
	case config.ScopesRules:
		if p.RulesScopes == nil {
			return AuthResult{}, fmt.Errorf("--scopes rules: %s has no scopes rule", p.Config.Rules.File)
		}
		r.Resolver = p.RulesScopes
	case config.ScopesCallout:
		if p.CalloutScopes == nil {
			return AuthResult{}, errNoCallout
		}
		r.Resolver = p.CalloutScopes
	}
	return r, nil
}

// authByMode builds --auth's authenticator and its own resolver: dev
// trusts the request's own headers; jwt verifies bearer tokens (with
// --jwt-jwks-url the key set is fetched when the app starts, failing the
// start unless --jwt-jwks-lazy, and refreshed until it stops); callout
// asks the backend.
func authByMode(p AuthParams) (AuthResult, error) {
	switch p.Config.Auth {
	case config.AuthDev:
		a, err := devauth.NewAuthenticator(devauth.Options{
			DefaultActor:     p.Config.DevAuth.Actor,
			DefaultPartition: p.Config.DevAuth.Partition,
		})
		if err != nil {
			return AuthResult{}, err
		}
		r, err := devauth.NewResolver(devauth.ResolverOptions{Variables: p.Schema.ScopeVariables()})
		if err != nil {
			return AuthResult{}, err
		}
		return AuthResult{Authenticator: a, Resolver: r}, nil
	case config.AuthJWT:
		j := p.Config.JWT
		leeway := j.Leeway
		if leeway == 0 {
			leeway = -1 // the adapter's "none"; its zero means its default
		}
		a, err := jwtauth.New(jwtauth.Options{
			Algorithm:       j.Algorithm,
			KeyFile:         j.KeyFile,
			JWKSURL:         j.JWKSURL,
			JWKSRefresh:     j.JWKSRefresh,
			JWKSMinRefetch:  j.JWKSMinRefetch,
			JWKSLazy:        j.JWKSLazy,
			Sleep:           p.Clock.Sleep,
			Issuer:          j.Issuer,
			Audience:        j.Audience,
			ActorClaim:      j.ActorClaim,
			PartitionClaim:  j.PartitionClaim,
			ScopesClaim:     j.ScopesClaim,
			TokenQueryParam: j.TokenQueryParam,
			Leeway:          leeway,
			Log:             p.Log.Named("auth"),
			Now:             p.Clock.Now,
		})
		if err != nil {
			return AuthResult{}, err
		}
		if j.JWKSURL != "" {
			p.Lifecycle.Append(fx.Hook{OnStart: a.Start, OnStop: a.Stop})
		}
		return AuthResult{Authenticator: a, Resolver: jwtauth.NewResolver()}, nil
	case config.AuthCallout:
		if p.CalloutAuth == nil {
			return AuthResult{}, errNoCallout
		}
		return AuthResult{Authenticator: p.CalloutAuth, Resolver: callout.IdentityScopes{}}, nil
	case config.AuthHost:
		// The embedding program decorates both ports with its own.
		return AuthResult{}, nil
	default:
		return AuthResult{}, fmt.Errorf("auth: unsupported mode %q", p.Config.Auth)
	}
}

// errNoCallout refuses --auth callout or --scopes callout in a graph
// without the callout adapters (CalloutModule and --callout-url).
var errNoCallout = errors.New("--auth callout and --scopes callout need --callout-url and wiring.CalloutModule")

// errNoAuthenticator refuses to mount a sync API route without identity.
var errNoAuthenticator = errors.New("no ports.Authenticator: with --auth host the embedding program must supply one")

// AuthModule provides ports.Authenticator and ports.ScopeResolver.
var AuthModule = fx.Module("syncd.auth", fx.Provide(NewAuth))

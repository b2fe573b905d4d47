package wiring

import (
	"errors"
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"

	devauth "github.com/syncd-dev/syncd/adapters/auth/dev"
	jwtauth "github.com/syncd-dev/syncd/adapters/auth/jwt"
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
}

// AuthResult provides the identity ports.
type AuthResult struct {
	fx.Out
	Authenticator ports.Authenticator
	Resolver      ports.ScopeResolver
}

// NewAuth builds the authenticator and scope resolver --auth selects:
// dev trusts the request's own headers and grants every declared scope
// variable unless the request narrows it; jwt verifies bearer tokens and
// grants their scopes claim. With --jwt-jwks-url the key set is fetched
// when the app starts (failing the start unless --jwt-jwks-lazy) and
// refreshed until it stops. --scopes rules then replaces the resolver
// with the scopes rule of --rules.
func NewAuth(p AuthParams) (AuthResult, error) {
	res, err := newAuth(p)
	if err != nil {
		return AuthResult{}, err
	}
	switch p.Config.Scopes {
	case config.ScopesRules:
		if p.RulesScopes == nil {
			return AuthResult{}, fmt.Errorf("--scopes rules: %s has no scopes rule", p.Config.Rules.File)
		}
		res.Resolver = p.RulesScopes
	}
	return res, nil
}

// newAuth builds what --auth selects.
func newAuth(p AuthParams) (AuthResult, error) {
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
	case config.AuthHost:
		// The embedding program decorates both ports with its own.
		return AuthResult{}, nil
	default:
		return AuthResult{}, fmt.Errorf("auth: unsupported mode %q", p.Config.Auth)
	}
}

// errNoAuthenticator refuses to mount a sync API route without identity.
var errNoAuthenticator = errors.New("no ports.Authenticator: with --auth host the embedding program must supply one")

// AuthModule provides ports.Authenticator and ports.ScopeResolver.
var AuthModule = fx.Module("syncd.auth", fx.Provide(NewAuth))

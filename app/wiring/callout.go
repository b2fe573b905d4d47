package wiring

import (
	"context"
	"fmt"
	"net"
	"net/url"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/callout"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// CalloutModule binds the callouts to the backend of --callout-url
// (docs/callout.md): one client, and the adapters each setting asks for —
// the authenticator of --auth callout and the resolver of --scopes
// callout (AuthModule installs them), the row validators of
// --callout-validate-tables and the commit validator of
// --callout-validate-commits (provided into the push hooks' groups). A
// host's own validators run beside them. Without --callout-url it binds
// nothing.
var CalloutModule = fx.Module("syncd.callout",
	fx.Provide(
		NewCalloutClient,
		newCalloutAuthenticator,
		newCalloutScopes,
		fx.Annotate(newCalloutRowValidators, fx.ResultTags(`group:"`+GroupRowValidators+`,flatten"`)),
		fx.Annotate(newCalloutCommitValidators, fx.ResultTags(`group:"`+GroupCommitValidators+`,flatten"`)),
	),
)

// CalloutClientParams are the inputs of the callout client.
type CalloutClientParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Log       *zap.Logger
	Clock     platform.Clock
	Metrics   *platform.Metrics
	Tracer    trace.TracerProvider `optional:"true"`
}

// NewCalloutClient builds the client every callout goes through, signing
// with --callout-key-file (KeysModule reloads it); nil without
// --callout-url.
func NewCalloutClient(p CalloutClientParams) (*callout.Client, error) {
	k := p.Config.Callout
	if k.URL == "" {
		return nil, nil
	}
	var keys [][]byte
	if k.KeyFile != "" {
		var err error
		if keys, err = platform.ReadKeyFile(k.KeyFile); err != nil {
			return nil, fmt.Errorf("--callout-key-file: %w", err)
		}
	}
	m, err := callout.NewMetrics(p.Metrics.Registry)
	if err != nil {
		return nil, err
	}
	log := p.Log.Named("callout")
	c, err := callout.New(callout.Options{
		BaseURL: k.URL, Keys: keys, MaxConcurrency: k.MaxConcurrency, MaxResponseBytes: k.MaxResponseBytes,
		Now: p.Clock.Now, Tracer: platform.TracingOn(p.Tracer), Metrics: m, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("--callout-key-file %s: %w", k.KeyFile, err)
	}
	p.Lifecycle.Append(fx.Hook{OnStop: func(context.Context) error { c.Close(); return nil }})
	log.Info("callouts on", zap.String("url", k.URL), zap.Int("signing_keys", len(keys)),
		zap.Duration("timeout", k.Timeout), zap.Duration("validate_timeout", k.ValidateTimeout), zap.Int("max_concurrency", k.MaxConcurrency))
	if u, _ := url.Parse(k.URL); u != nil && u.Scheme == "http" && !config.IsLoopback(net.JoinHostPort(u.Hostname(), "0")) {
		log.Warn("--callout-url is plain http to a non-loopback address: the forwarded credentials and the rows cross the network unencrypted")
	}
	return c, nil
}

type calloutParams struct {
	fx.In
	Config config.Config
	Log    *zap.Logger
	Clock  platform.Clock
	Schema *schema.Schema
	Client *callout.Client `optional:"true"`
}

// newCalloutAuthenticator is the authenticator of --auth callout; nil
// otherwise.
func newCalloutAuthenticator(p calloutParams) (*callout.Authenticator, error) {
	if p.Config.Auth != config.AuthCallout || p.Client == nil {
		return nil, nil
	}
	return callout.NewAuthenticator(callout.AuthOptions{Client: p.Client, Timeout: p.Config.Callout.Timeout,
		ForwardHeaders: p.Config.Callout.ForwardedHeaders()})
}

// newCalloutScopes is the resolver of --scopes callout; nil otherwise.
func newCalloutScopes(p calloutParams) (*callout.ScopeResolver, error) {
	if p.Config.Scopes != config.ScopesCallout || p.Client == nil {
		return nil, nil
	}
	return callout.NewScopeResolver(callout.ScopesOptions{Client: p.Client, Timeout: p.Config.Callout.Timeout,
		TTL: p.Config.Callout.ScopesTTL, Now: p.Clock.Now})
}

func newCalloutValidators(p calloutParams) (*callout.Validators, error) {
	return callout.NewValidators(callout.ValidateOptions{Client: p.Client, Schema: p.Schema,
		Timeout: p.Config.Callout.ValidateTimeout, Log: p.Log.Named("callout")})
}

// newCalloutRowValidators are the validators of --callout-validate-tables;
// a table the schema does not declare stops the start.
func newCalloutRowValidators(p calloutParams) ([]ports.RowValidator, error) {
	tables := p.Config.Callout.ValidatedTables()
	if len(tables) == 0 || p.Client == nil {
		return nil, nil
	}
	v, err := newCalloutValidators(p)
	if err != nil {
		return nil, err
	}
	rows, err := v.Rows(tables)
	if err != nil {
		return nil, fmt.Errorf("--callout-validate-tables: %w", err)
	}
	return rows, nil
}

// newCalloutCommitValidators is the validator of
// --callout-validate-commits (a list, for the group).
func newCalloutCommitValidators(p calloutParams) ([]ports.CommitValidator, error) {
	if !p.Config.Callout.ValidateCommits || p.Client == nil {
		return nil, nil
	}
	v, err := newCalloutValidators(p)
	if err != nil {
		return nil, err
	}
	return []ports.CommitValidator{v.Commit()}, nil
}

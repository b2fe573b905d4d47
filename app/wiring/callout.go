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
	"github.com/syncd-dev/syncd/app/operations"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/reactions"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// CalloutModule binds the callouts to the backend of --callout-url
// (docs/callout.md): one client, and the adapters each setting asks for —
// the authenticator of --auth callout and the resolver of --scopes
// callout (AuthModule installs them), the row validators of
// --callout-validate-tables and the commit validator of
// --callout-validate-commits (provided into the push hooks' groups; the
// queries their backend asks for run through the operations registry), the
// commands of --callout-commands (into the remote commands' group) and
// the reaction handlers of --callout-reactions (into the reaction
// handlers' group). A host's own hooks run beside them; a command name or
// reaction type both a host and the backend serve stops the start.
// Without --callout-url it binds nothing.
var CalloutModule = fx.Module("syncd.callout",
	fx.Provide(
		NewCalloutClient,
		newCalloutAuthenticator,
		newCalloutScopes,
		fx.Annotate(newCalloutRowValidators, fx.ResultTags(`group:"`+GroupRowValidators+`,flatten"`)),
		fx.Annotate(newCalloutCommitValidators, fx.ResultTags(`group:"`+GroupCommitValidators+`,flatten"`)),
		fx.Annotate(newCalloutCommands, fx.ResultTags(`group:"`+GroupRemoteCommands+`,flatten"`)),
		fx.Annotate(newCalloutReactionHandlers, fx.ResultTags(`group:"`+GroupReactionHandlers+`,flatten"`)),
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
		zap.Duration("timeout", k.Timeout), zap.Duration("validate_timeout", k.ValidateTimeout), zap.Int("max_concurrency", k.MaxConcurrency),
		zap.Strings("commands", k.CommandNames()), zap.Strings("reactions", k.ReactionTypes()))
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

// calloutValidateParams are the validators' inputs, the registry among
// them: it runs the queries a validate answer asks for (OperationsModule).
// calloutParams cannot hold it, as the registry holds the backend's
// commands.
type calloutValidateParams struct {
	fx.In
	Config   config.Config
	Log      *zap.Logger
	Schema   *schema.Schema
	Client   *callout.Client      `optional:"true"`
	Registry *operations.Registry `optional:"true"`
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

// newCalloutValidators builds the validate callouts; the queries a
// backend asks for are the registry's (--operations), and without one
// each is operation.unknown.
func newCalloutValidators(p calloutValidateParams) (*callout.Validators, error) {
	o := callout.ValidateOptions{Client: p.Client, Schema: p.Schema,
		Timeout: p.Config.Callout.ValidateTimeout, Log: p.Log.Named("callout")}
	if p.Registry != nil {
		o.Queries = p.Registry
	}
	return callout.NewValidators(o)
}

// newCalloutRowValidators are the validators of --callout-validate-tables;
// a table the schema does not declare stops the start.
func newCalloutRowValidators(p calloutValidateParams) ([]ports.RowValidator, error) {
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
func newCalloutCommitValidators(p calloutValidateParams) ([]ports.CommitValidator, error) {
	if !p.Config.Callout.ValidateCommits || p.Client == nil {
		return nil, nil
	}
	v, err := newCalloutValidators(p)
	if err != nil {
		return nil, err
	}
	return []ports.CommitValidator{v.Commit()}, nil
}

// newCalloutCommands are the remote commands of --callout-commands: each
// runs at BASE/commands/<name> inside its push transaction. The backend's
// answer is both the command's authorization and its plan, so Authorize
// admits every caller and a refusal comes from Run.
func newCalloutCommands(p calloutParams) ([]operations.Command, error) {
	names := p.Config.Callout.CommandNames()
	if len(names) == 0 || p.Client == nil {
		return nil, nil
	}
	cmds, err := callout.NewCommands(callout.CommandOptions{Client: p.Client, Schema: p.Schema,
		Timeout: p.Config.Callout.CommandTimeout, Log: p.Log.Named("callout")})
	if err != nil {
		return nil, err
	}
	admit := func(context.Context, operations.AuthContext, opdomain.Value) (bool, error) { return true, nil }
	out := make([]operations.Command, len(names))
	for i, name := range names {
		out[i] = operations.Command{ID: name, Authorize: admit,
			Run: func(ctx context.Context, cc operations.CommandContext, params opdomain.Value) ([]operations.Mutation, error) {
				writes, err := cmds.Run(ctx, callout.CommandCall{Name: name, RequestID: cc.RequestID, ActorID: cc.ActorID,
					Partition: cc.Partition, ClientID: cc.ClientID, Params: params, GetRow: cc.GetRow})
				if err != nil {
					return nil, err
				}
				muts := make([]operations.Mutation, len(writes))
				for j, w := range writes {
					muts[j] = operations.Mutation{Table: w.Table, Delete: w.Delete, RowID: w.RowID, Values: w.Values}
				}
				return muts, nil
			}}
	}
	return out, nil
}

type calloutReactionParams struct {
	fx.In
	Config  config.Config
	Log     *zap.Logger
	Client  *callout.Client       `optional:"true"`
	Planner ports.ReactionPlanner `optional:"true"`
	Rules   ports.ReactionPlanner `name:"syncd.rules_reactions" optional:"true"`
}

// newCalloutReactionHandlers are the webhooks of --callout-reactions,
// delivered by the reaction runner (ReactionsModule). Reactions are
// planned by the reaction rules of --rules or a host's ReactionPlanner;
// without either nothing is ever delivered, which is logged.
func newCalloutReactionHandlers(p calloutReactionParams) ([]ports.ReactionHandler, error) {
	types := p.Config.Callout.ReactionTypes()
	if len(types) == 0 || p.Client == nil {
		return nil, nil
	}
	hs, err := callout.NewReactionHandlers(callout.ReactionOptions{Client: p.Client, Timeout: p.Config.Callout.ReactionTimeout,
		Lease: reactions.DefaultLeaseDuration}, types)
	if err != nil {
		return nil, fmt.Errorf("--callout-reactions: %w", err)
	}
	if p.Planner == nil && p.Rules == nil {
		p.Log.Named("callout").Warn("--callout-reactions is set, but nothing plans reactions (reaction rules in --rules, a host's app.ProvideReactionPlanner): "+
			"no reaction is planned, so none is delivered", zap.Strings("types", types))
	}
	return hs, nil
}

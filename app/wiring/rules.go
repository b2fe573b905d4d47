package wiring

import (
	"errors"
	"fmt"
	"slices"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/rules"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// NameRulesScopes names the scopes rule's resolver, which NewAuth
// installs with --scopes rules.
const NameRulesScopes = "syncd.rules_scopes"

// NameRulesReactions names the reaction rules' planner, which
// NewPushPipeline installs unless a host registered its own.
const NameRulesReactions = "syncd.rules_reactions"

// RulesModule loads --rules and provides its validators into the push
// pipeline's groups, its scopes rule to NewAuth and its reaction rules'
// planner to NewPushPipeline.
var RulesModule = fx.Module("syncd.rules", fx.Provide(NewRules), fx.Invoke(warnUnhandledRuleReactions))

// RulesParams are the inputs of NewRules.
type RulesParams struct {
	fx.In
	Config  config.Config
	Schema  *schema.Schema
	Log     *zap.Logger
	Queries ports.TxQueries `optional:"true"`
}

// RulesResult is what a rules file provides: nothing without --rules.
type RulesResult struct {
	fx.Out
	RowValidators    []ports.RowValidator    `group:"syncd.row_validators,flatten"`
	CommitValidators []ports.CommitValidator `group:"syncd.commit_validators,flatten"`
	Scopes           ports.ScopeResolver     `name:"syncd.rules_scopes"`
	Reactions        ports.ReactionPlanner   `name:"syncd.rules_reactions"`
	ReactionTypes    RulesReactionTypes
}

// RulesReactionTypes are the reaction types the rules file plans.
type RulesReactionTypes []string

// NewRules compiles --rules against the served schema while the graph is
// built, so a rule that does not compile fails the start naming its file,
// line and rule.
func NewRules(p RulesParams) (RulesResult, error) {
	if p.Config.Rules.File == "" {
		return RulesResult{}, nil
	}
	r, err := rules.Load(p.Config.Rules.File, rules.Options{Schema: p.Schema, Log: p.Log.Named("rules"), Queries: p.Queries})
	if err != nil {
		return RulesResult{}, err
	}
	res := RulesResult{RowValidators: r.RowValidators(), Scopes: r.ScopeResolver(), Reactions: r.ReactionPlanner(), ReactionTypes: r.ReactionTypes()}
	if cv := r.CommitValidator(); cv != nil {
		res.CommitValidators = []ports.CommitValidator{cv}
	}
	p.Log.Info("rules loaded", zap.String("rules_file", r.File()), zap.Int("tables", len(res.RowValidators)),
		zap.Bool("commit_rules", len(res.CommitValidators) > 0), zap.Bool("scopes_rule", res.Scopes != nil),
		zap.Int("reaction_rules", r.ReactionRules()), zap.Uint64("cost_limit", r.CostLimit()))
	return res, nil
}

// reactionPlanner is the one planner the push pipeline runs: the host's
// (app.ProvideReactionPlanner) or the rules file's. Both is a start
// error, not a silent choice; so are reaction rules over a storage that
// cannot keep reactions.
func reactionPlanner(host, fromRules ports.ReactionPlanner, store ports.Storage) (ports.ReactionPlanner, error) {
	if fromRules == nil {
		return host, nil
	}
	if host != nil {
		return nil, errors.New("--rules: the rules file has reactions, and the program registered its own reaction planner " +
			"(app.ProvideReactionPlanner): plan reactions in one of them")
	}
	if _, ok := store.(ports.ReactionQueue); !ok {
		return nil, errors.New("--rules: the rules file has reactions, but the storage cannot keep reactions")
	}
	return fromRules, nil
}

type unhandledRuleReactionsParams struct {
	fx.In
	Log      *zap.Logger
	Types    RulesReactionTypes      `optional:"true"`
	Handlers []ports.ReactionHandler `group:"syncd.reaction_handlers"`
}

// warnUnhandledRuleReactions logs the reaction types the rules plan that
// no handler of this node delivers: they wait, pending, for a node that
// has one.
func warnUnhandledRuleReactions(p unhandledRuleReactionsParams) {
	var missing []string
	for _, t := range p.Types {
		if !slices.ContainsFunc(p.Handlers, func(h ports.ReactionHandler) bool { return h != nil && h.Type() == t }) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		p.Log.Warn(fmt.Sprintf("the rules plan reactions of %d type(s) no handler of this node delivers (a program's app.ProvideReactionHandler, "+
			"--callout-reactions): they stay pending until a node with a handler runs", len(missing)), zap.Strings("types", missing))
	}
}

package wiring

import (
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

// RulesModule loads --rules and provides its validators into the push
// pipeline's groups and its scopes rule to NewAuth.
var RulesModule = fx.Module("syncd.rules", fx.Provide(NewRules))

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
}

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
	res := RulesResult{RowValidators: r.RowValidators(), Scopes: r.ScopeResolver()}
	if cv := r.CommitValidator(); cv != nil {
		res.CommitValidators = []ports.CommitValidator{cv}
	}
	p.Log.Info("rules loaded", zap.String("rules_file", r.File()), zap.Int("tables", len(res.RowValidators)),
		zap.Bool("commit_rules", len(res.CommitValidators) > 0), zap.Bool("scopes_rule", res.Scopes != nil),
		zap.Uint64("cost_limit", r.CostLimit()))
	return res, nil
}

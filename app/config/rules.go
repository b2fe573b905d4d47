package config

import (
	"errors"
	"flag"
)

// Rules are the declarative rules' settings (docs/rules.md).
type Rules struct {
	// File is the YAML rules file: a scopes rule, row validators,
	// commit validators and reaction rules in CEL, compiled against the
	// schema at start.
	// Empty: no rules.
	File string
}

func (r *Rules) flags(fs *flag.FlagSet) {
	fs.StringVar(&r.File, "rules", r.File, "YAML file of declarative rules in CEL: a scopes rule (with --scopes rules), row validators, commit validators and durable reactions, checked against the schema at start (see docs/rules.md)")
}

func (r Rules) validate(scopes string) []error {
	if scopes == ScopesRules && r.File == "" {
		return []error{errors.New("--scopes rules needs --rules FILE with a scopes rule")}
	}
	return nil
}

package config_test

import "testing"

func TestRulesSettings(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		env        []string
		wantErr    string
		wantScopes string
		wantFile   string
	}{
		{name: "defaults: the auth mode's scopes, no rules", wantScopes: "auth"},
		{name: "rules validators only", args: []string{"--rules", "rules.yaml"}, wantScopes: "auth", wantFile: "rules.yaml"},
		{name: "scopes from the rules", args: []string{"--scopes", "rules", "--rules", "rules.yaml"}, wantScopes: "rules", wantFile: "rules.yaml"},
		{name: "environment", env: []string{"SYNCD_SCOPES=rules", "SYNCD_RULES=r.yaml"}, wantScopes: "rules", wantFile: "r.yaml"},
		{name: "scopes rules without a file", args: []string{"--scopes", "rules"}, wantErr: "--scopes rules needs --rules"},
		{name: "unknown resolver", args: []string{"--scopes", "ldap"}, wantErr: `--scopes "ldap"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadSettings(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if cfg.Scopes != tc.wantScopes || cfg.Rules.File != tc.wantFile {
				t.Fatalf("got --scopes %q --rules %q", cfg.Scopes, cfg.Rules.File)
			}
		})
	}
}

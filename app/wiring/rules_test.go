package wiring

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
)

func TestNewRules(t *testing.T) {
	s, err := platform.CompileSchema(platform.NewSchemaSource(config.Default()), platform.NewReadiness(platform.NewClock()))
	if err != nil {
		t.Fatal(err)
	}
	write := func(src string) string {
		p := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := write(`
scopes: '{"owner_id": [actor], "list_id": claims.?lists.orValue([]).map(l, string(l))}'
validators:
  todos:
    - {name: title, rule: size(row.title) <= 200, code: todos.title, message: m}
commitValidators:
  - {name: small, rule: size(ops) <= 10, code: todos.big, message: m}
`)
	validatorsOnly := write("validators:\n  todos:\n    - {name: title, rule: size(row.title) <= 200, code: todos.title, message: m}\n")
	broken := write("validators:\n  todos:\n    - {name: title, rule: size(row.titel) <= 200, code: todos.title, message: m}\n")
	tests := []struct {
		name       string
		cfg        func(*config.Config)
		wantErr    string // from NewRules, then NewAuth
		rows       int
		commits    int
		rulesScope bool
	}{
		{"no rules", func(*config.Config) {}, "", 0, 0, false},
		{"validators, scopes by --auth", func(c *config.Config) { c.Rules.File = full }, "", 1, 1, false},
		{"scopes by the rules", func(c *config.Config) { c.Rules.File, c.Scopes = full, config.ScopesRules }, "", 1, 1, true},
		{"--scopes rules without a scopes rule", func(c *config.Config) { c.Rules.File, c.Scopes = validatorsOnly, config.ScopesRules },
			"has no scopes rule", 1, 0, false},
		{"a rule that does not compile", func(c *config.Config) { c.Rules.File = broken }, broken + ":3: rule validators.todos/title: undefined field 'titel'", 0, 0, false},
		{"a missing file", func(c *config.Config) { c.Rules.File = filepath.Join(t.TempDir(), "none.yaml") }, "none.yaml", 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Auth, cfg.DevAuth.Actor = config.AuthDev, "alice"
			tc.cfg(&cfg)
			res, err := NewRules(RulesParams{Config: cfg, Schema: s, Log: zap.NewNop()})
			if err == nil {
				if len(res.RowValidators) != tc.rows || len(res.CommitValidators) != tc.commits {
					t.Fatalf("provided %d row and %d commit validators", len(res.RowValidators), len(res.CommitValidators))
				}
				var auth AuthResult
				auth, err = NewAuth(AuthParams{Config: cfg, Schema: s, Log: zap.NewNop(), Clock: platform.NewClock(), RulesScopes: res.Scopes})
				if err == nil {
					if auth.Resolver == nil || (auth.Resolver == res.Scopes) != tc.rulesScope {
						t.Fatalf("resolver %T, rules' %T", auth.Resolver, res.Scopes)
					}
				}
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

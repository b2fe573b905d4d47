package wiring

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/ports"
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
	reactionsOnly := write("reactions:\n  - {name: done, table: todos, on: [update], when: row.done, type: todos.completed, payload: '{\"todo\": rowId}'}\n")
	broken := write("validators:\n  todos:\n    - {name: title, rule: size(row.titel) <= 200, code: todos.title, message: m}\n")
	tests := []struct {
		name       string
		cfg        func(*config.Config)
		wantErr    string // from NewRules, then NewAuth
		rows       int
		commits    int
		rulesScope bool
		reactions  []string
	}{
		{"no rules", func(*config.Config) {}, "", 0, 0, false, nil},
		{"validators, scopes by --auth", func(c *config.Config) { c.Rules.File = full }, "", 1, 1, false, nil},
		{"scopes by the rules", func(c *config.Config) { c.Rules.File, c.Scopes = full, config.ScopesRules }, "", 1, 1, true, nil},
		{"--scopes rules without a scopes rule", func(c *config.Config) { c.Rules.File, c.Scopes = validatorsOnly, config.ScopesRules },
			"has no scopes rule", 1, 0, false, nil},
		{"a rule that does not compile", func(c *config.Config) { c.Rules.File = broken }, broken + ":3: rule validators.todos/title: undefined field 'titel'", 0, 0, false, nil},
		{"a missing file", func(c *config.Config) { c.Rules.File = filepath.Join(t.TempDir(), "none.yaml") }, "none.yaml", 0, 0, false, nil},
		{"reaction rules alone", func(c *config.Config) { c.Rules.File = reactionsOnly }, "", 0, 0, false, []string{"todos.completed"}},
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
				if (res.Reactions != nil) != (tc.reactions != nil) || !slices.Equal(res.ReactionTypes, tc.reactions) {
					t.Fatalf("provided planner %v of types %v, want %v", res.Reactions, res.ReactionTypes, tc.reactions)
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

type planner struct{ ports.ReactionPlanner }

// storeWithoutQueue is a storage that cannot keep reactions.
type storeWithoutQueue struct{ ports.Storage }

// queueStore is a storage with a reaction queue.
type queueStore struct {
	ports.Storage
	ports.ReactionQueue
}

// TestReactionPlannerChoice: the push pipeline runs the host's planner
// or the rules file's; both, or reaction rules over a storage without a
// reaction queue, stop the start.
func TestReactionPlannerChoice(t *testing.T) {
	host, fromRules := &planner{}, &planner{}
	tests := []struct {
		name            string
		host, fromRules ports.ReactionPlanner
		store           ports.Storage
		want            ports.ReactionPlanner
		wantErr         string
	}{
		{"none", nil, nil, queueStore{}, nil, ""},
		{"the host's", host, nil, storeWithoutQueue{}, host, ""},
		{"the rules'", nil, fromRules, queueStore{}, fromRules, ""},
		{"both", host, fromRules, queueStore{}, nil, "the program registered its own reaction planner"},
		{"rules over a storage without a queue", nil, fromRules, storeWithoutQueue{}, nil, "the storage cannot keep reactions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reactionPlanner(tc.host, tc.fromRules, tc.store)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
					t.Fatalf("got %v, %v; want %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v", got, err)
			}
		})
	}
}

type handler struct {
	ports.ReactionHandler
	typ string
}

func (h handler) Type() string { return h.typ }

// TestWarnUnhandledRuleReactions: a type the rules plan that no handler
// of the node delivers is named at start.
func TestWarnUnhandledRuleReactions(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	warnUnhandledRuleReactions(unhandledRuleReactionsParams{Log: zap.New(core), Types: RulesReactionTypes{"a.done", "b.done"},
		Handlers: []ports.ReactionHandler{handler{typ: "a.done"}}})
	if all := logs.All(); len(all) != 1 || !slices.Equal(all[0].ContextMap()["types"].([]any), []any{"b.done"}) {
		t.Fatalf("warnings %+v", all)
	}
	warnUnhandledRuleReactions(unhandledRuleReactionsParams{Log: zap.New(core), Types: RulesReactionTypes{"a.done"},
		Handlers: []ports.ReactionHandler{handler{typ: "a.done"}}})
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d warnings with every type handled", n)
	}
}

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	gojwt "github.com/golang-jwt/jwt/v5"
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// exampleRules is the rules file the demo schema ships with.
const exampleRules = "../../examples/rules.yaml"

// goTitleLength is examples/rules.yaml's todos/title-length written as a
// Go validator.
type goTitleLength struct{}

func (goTitleLength) Table() string { return "todos" }

func (goTitleLength) ValidateRow(_ context.Context, v ports.RowValidation) error {
	if v.Op != commit.OpUpsert {
		return nil
	}
	title, _ := v.Row["title"].(string)
	if n := utf8.RuneCountInString(strings.TrimSpace(title)); n >= 1 && utf8.RuneCountInString(title) <= 200 {
		return nil
	}
	r, err := ports.NewValidationRejection("todos.title_length", "a todo's title has 1 to 200 characters",
		&ssp2.RejectionDetails{FieldPaths: []string{"title"}, Reason: "title_length"})
	if err != nil {
		return err
	}
	return r
}

// goBulkDeletes is examples/rules.yaml's commitValidators/bulk-delete-limit
// written as a Go validator.
type goBulkDeletes struct{}

func (goBulkDeletes) ValidateCommit(_ context.Context, c ports.CommitValidation) error {
	n := 0
	for _, o := range c.Operations {
		if o.Op != commit.OpDelete {
			continue
		}
		if n++; n > 20 {
			r, err := ports.RejectOp(o.OpIndex, "todos.too_many_deletes", "a commit deletes at most 20 rows", nil)
			if err != nil {
				return err
			}
			return r
		}
	}
	return nil
}

// TestRulesOverJWT runs the demo schema with --auth jwt --scopes rules
// --rules examples/rules.yaml: the token's lists claim grants list_id, a
// rule's rejection reaches the client with its code, message and details
// and nothing of the commit is applied, and every result is the same as
// the one a server with the same rules as Go validators (and the grant as
// a scopes claim) answers.
func TestRulesOverJWT(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		secret := []byte("a test secret of reasonable length!")
		keyFile := filepath.Join(t.TempDir(), "hs256.key")
		if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
			t.Fatal(err)
		}
		jwtAuth := func(c *config.Config) { c.Auth, c.JWT.Algorithm, c.JWT.KeyFile = config.AuthJWT, "HS256", keyFile }
		withRules := start(t, e, serverOpts{ir: todos.IR(), config: func(c *config.Config) {
			jwtAuth(c)
			c.Scopes, c.Rules.File = config.ScopesRules, exampleRules
		}, extra: []fx.Option{withReactionQueue()}})
		// The same rules in Go, on a fresh database of the same engine.
		inGo := start(t, e, serverOpts{ir: todos.IR(), config: jwtAuth, extra: []fx.Option{
			app.ProvideRowValidator(func() goTitleLength { return goTitleLength{} }),
			app.ProvideCommitValidator(func() goBulkDeletes { return goBulkDeletes{} }),
		}})

		token := func(claims gojwt.MapClaims) string {
			claims["sub"], claims["partition"], claims["exp"] = "alice", "acme", time.Now().Add(time.Hour).Unix()
			tok, err := gojwt.NewWithClaims(gojwt.SigningMethodHS256, claims).SignedString(secret)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		// The rules read the lists claim; the Go server grants the scopes
		// claim, which says the same.
		alice := call{bearer: token(gojwt.MapClaims{"lists": []any{"l-1"},
			"scopes": map[string]any{"owner_id": []any{"alice"}, "list_id": []any{"l-1"}}})}
		sch := withRules.sch
		list := func(id, title string) []byte {
			return ssptest.Sparse(t, sch.Table("lists"), ssptest.Cols{"id": rowcodec.String(id), "owner_id": rowcodec.String("alice"),
				"title": rowcodec.String(title), "updated_at_ms": rowcodec.Int(1)})
		}
		todo := func(id, listID, title string) []byte {
			return ssptest.Sparse(t, sch.Table("todos"), ssptest.Cols{"id": rowcodec.String(id), "list_id": rowcodec.String(listID),
				"title": rowcodec.String(title), "done": rowcodec.Bool(false), "position": rowcodec.Int(0), "updated_at_ms": rowcodec.Int(1)})
		}
		bulk := []ssp2.PushOperation{ssptest.Upsert("todos", "t-4", todo("t-4", "l-1", "Bread"), -1)}
		for i := range 21 {
			bulk = append(bulk, ssptest.Delete("todos", fmt.Sprint("gone-", i)))
		}
		commits := []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("lists", "l-1", list("l-1", "Groceries"), -1)),
			ssptest.Commit("k2", ssptest.Upsert("todos", "t-1", todo("t-1", "l-1", "Milk"), -1)),
			ssptest.Commit("k3", ssptest.Upsert("todos", "t-2", todo("t-2", "l-2", "Eggs"), -1)),
			ssptest.Commit("k4", ssptest.Upsert("todos", "t-9", todo("t-9", "l-1", "Tea"), -1),
				ssptest.Upsert("todos", "t-3", todo("t-3", "l-1", strings.Repeat("x", 201)), -1)),
			ssptest.Commit("k5", bulk...),
		}
		answers := map[string]ssptest.Resp{}
		for name, s := range map[string]*server{"rules": withRules, "go": inGo} {
			ep := s.epoch(alice)
			resp, _ := s.sync(alice, ssptest.Req{ClientID: "c1", SchemaVersion: sch.Version, Epoch: ep, Commits: commits})
			answers[name] = resp
			for i, want := range []ssp2.PushStatus{ssp2.PushApplied, ssp2.PushApplied, ssp2.PushRejected, ssp2.PushRejected, ssp2.PushRejected} {
				if resp.Results[i].Status != want {
					t.Fatalf("%s: commit %d: %+v", name, i, resp.Results[i])
				}
			}
			// Out of the claim's lists: scope authorization, before any rule.
			rejected(t, resp.Results[2], 0, "sync.forbidden")
			// The title rule, at its operation, with its message and details.
			rejected(t, resp.Results[3], 1, "todos.title_length")
			if m := resp.Results[3].Results[0].Message; m != "a todo's title has 1 to 200 characters" {
				t.Fatalf("%s: message %q", name, m)
			}
			if d := resp.Details["k4"]; d == nil || d.Entries[0].Details.Reason != "title_length" || !reflect.DeepEqual(d.Entries[0].Details.FieldPaths, []string{"title"}) {
				t.Fatalf("%s: details %+v", name, resp.Details)
			}
			// The commit rule, attributed to the 21st delete.
			rejected(t, resp.Results[4], 21, "todos.too_many_deletes")
			if m := resp.Results[4].Results[0].Message; m != "a commit deletes at most 20 rows" {
				t.Fatalf("%s: message %q", name, m)
			}
			// Nothing of a rejected commit is applied.
			for _, id := range []string{"t-2", "t-3", "t-4", "t-9"} {
				if row, err := s.store.GetRow(context.Background(), "acme", "todos", id); err != nil || row != nil {
					t.Fatalf("%s: row %s of a rejected commit: %+v %v", name, id, row, err)
				}
			}
			if row, _ := s.store.GetRow(context.Background(), "acme", "todos", "t-1"); row == nil {
				t.Fatalf("%s: t-1 not applied", name)
			}
			if b, _ := s.store.LogBounds(context.Background(), "acme"); b.MaxSeq != 2 {
				t.Fatalf("%s: the log holds %d commits, want the 2 applied", name, b.MaxSeq)
			}
		}
		if !reflect.DeepEqual(answers["rules"].Results, answers["go"].Results) || !reflect.DeepEqual(answers["rules"].Details, answers["go"].Details) {
			t.Fatalf("rules and Go validators answer differently:\nrules %+v %+v\ngo    %+v %+v",
				answers["rules"].Results, answers["rules"].Details, answers["go"].Results, answers["go"].Details)
		}

		// Reads follow the claim too: the granted list's todos are served,
		// another list's subscription is revoked.
		r := newReplica(t, withRules, alice, "c2")
		r.subscribe("mine", "todos", map[string][]string{"list_id": {"l-1"}})
		r.pull()
		if st := r.sub("mine").status; st != ssp2.SubActive || len(r.rows["todos"]) != 1 {
			t.Fatalf("granted list: %v, rows %v", st, r.rows["todos"])
		}
		other := newReplica(t, withRules, alice, "c3")
		other.subscribe("other", "todos", map[string][]string{"list_id": {"l-2"}})
		other.pull()
		if st := other.sub("other"); st.status != ssp2.SubRevoked || st.reason != "sync.scope_revoked" {
			t.Fatalf("list outside the claim: %+v", st)
		}
		// A token without the claim reaches no list's todos: its write is
		// forbidden.
		bob := call{bearer: token(gojwt.MapClaims{})}
		resp, _ := withRules.sync(bob, ssptest.Req{ClientID: "c4", SchemaVersion: sch.Version, Epoch: withRules.epoch(bob),
			Commits: []*ssp2.PushCommit{ssptest.Commit("k1", ssptest.Upsert("todos", "t-5", todo("t-5", "l-1", "Jam"), -1))}})
		rejected(t, resp.Results[0], 0, "sync.forbidden")
	})
}

// TestRuleOverItsCostLimit: a rule that would run long is stopped by its
// cost limit and its commit rejected as any failing validator's is,
// sync.constraint_violation with the fixed message, nothing applied; the
// log names the rule.
func TestRuleOverItsCostLimit(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		file := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(file, []byte(`
costLimit: 1000
validators:
  tasks:
    - name: expensive
      rule: row.title.split("").all(a, row.title.split("").all(b, a + b != ""))
      code: app.never
      message: never
`), 0o600); err != nil {
			t.Fatal(err)
		}
		s := start(t, e, serverOpts{config: func(c *config.Config) { c.Rules.File = file }})
		c := call{}
		ep := s.epoch(c)
		req := func(id, title string) ssptest.Req {
			return ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{ssptest.Commit(id,
				ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1),
				ssptest.Upsert("tasks", "t-"+id, task(t, s.sch, "t-"+id, "p-1", title), -1))}}
		}
		resp, _ := s.sync(c, req("k1", "short"))
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("within the limit: %+v", resp.Results[0])
		}
		resp, _ = s.sync(c, req("k2", strings.Repeat("long ", 40)))
		rejected(t, resp.Results[0], 1, "sync.constraint_violation")
		if m := resp.Results[0].Results[0].Message; m != "write validator failed" {
			t.Fatalf("message %q", m)
		}
		if row, _ := s.store.GetRow(context.Background(), "default", "tasks", "t-k2"); row != nil {
			t.Fatal("the rejected commit's row landed")
		}
		found := false
		for _, l := range s.logs.FilterMessage("rule failed").All() {
			found = found || (l.ContextMap()["rule"] == "validators.tasks/expensive" && strings.Contains(fmt.Sprint(l.ContextMap()["cause"]), "cost limit 1000"))
		}
		if !found {
			t.Fatal("no log line names the rule and its cost limit")
		}
	})
}

// TestRulesReadInsideThePush: CEL validators read with db.query (a query
// registered by --operations, SPEC §6.7 queryAuthoritative) and db.lookup
// (an index, §6.8 scanRowsByIndex) on the push transaction, so they see
// the commit's earlier operations, on both engines.
func TestRulesReadInsideThePush(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		dir := t.TempDir()
		ops, file := filepath.Join(dir, "operations.json"), filepath.Join(dir, "rules.yaml")
		if err := os.WriteFile(ops, []byte(`{"queries": [{"id": "tasks.inProject", "table": "tasks",
		  "filters": [{"column": "project_id", "op": "eq", "param": "project"}], "maxRows": 100}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(`
validators:
  tasks:
    - name: three-per-project
      rule: |
        db.query("tasks.inProject", {"project": row.project_id}).filter(r, r.id != rowId).size() < 3
      code: app.project_full
      message: a project holds at most three tasks
    - name: title-once
      rule: |
        db.lookup("tasks", "tasks_project_title", [row.project_id, row.title]).all(r, r.id == rowId)
      code: app.title_taken
      message: a title is used once per project
`), 0o600); err != nil {
			t.Fatal(err)
		}
		s := start(t, e, serverOpts{config: func(c *config.Config) { c.Operations, c.Rules.File = ops, file }})
		writer := call{actor: "alice", scopes: `{"owner":["alice"],"project_id":["*"]}`}
		ep := s.epoch(writer)
		push := func(id string, ops ...ssp2.PushOperation) *ssp2.PushResult {
			resp, _ := s.sync(writer, ssptest.Req{ClientID: "w1", SchemaVersion: s.sch.Version, Epoch: ep,
				Commits: []*ssp2.PushCommit{ssptest.Commit(id, ops...)}})
			return resp.Results[0]
		}
		up := func(id, project, title string) ssp2.PushOperation {
			return ssptest.Upsert("tasks", id, task(t, s.sch, id, project, title), -1)
		}
		if r := push("k1", up("t1", "p1", "a"), up("t2", "p1", "b")); r.Status != ssp2.PushApplied {
			t.Fatalf("two tasks: %+v", r)
		}
		// t4's query counts t1, t2 and the staged t3.
		rejected(t, push("k2", up("t3", "p1", "c"), up("t4", "p1", "d")), 1, "app.project_full")
		// t6's lookup finds the staged t5 under the same title.
		rejected(t, push("k3", up("t5", "p2", "same"), up("t6", "p2", "same")), 1, "app.title_taken")
		if r := push("k4", up("t5", "p2", "same"), up("t3", "p1", "c")); r.Status != ssp2.PushApplied {
			t.Fatalf("third task of p1, first of p2: %+v", r)
		}
		for _, id := range []string{"t4", "t6"} {
			if row, _ := s.store.GetRow(context.Background(), "default", "tasks", id); row != nil {
				t.Fatalf("row %s of a rejected commit landed", id)
			}
		}
	})
}

// TestRulesReactions: the reaction rules of --rules plan in the push
// transaction: an accepted commit's reactions are stored with it, with
// the key SPEC §6.9 derives and the rule's payload; a rejected commit and
// a replay plan nothing; a rule that cannot plan fails the push as a
// server failure with nothing of the commit stored, and its log line
// names the rule.
func TestRulesReactions(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		file := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(file, []byte(`
reactions:
  - name: task-done
    table: tasks
    on: [update]
    when: row.done && !stored.done
    type: tasks.done
    payload: '{"task": rowId, "title": row.title}'
  - name: numbered-project
    table: projects
    on: [insert]
    key: '"project"'
    type: projects.numbered
    maxAttempts: 3
    payload: '{"number": int(row.name)}'
`), 0o600); err != nil {
			t.Fatal(err)
		}
		s := start(t, e, serverOpts{config: func(c *config.Config) { c.Rules.File = file }, extra: []fx.Option{withReactionQueue()}})
		c := call{}
		ep := s.epoch(c)
		done := func(id, title string) []byte {
			return ssptest.Sparse(t, s.sch.Table("tasks"), ssptest.Cols{"id": rowcodec.String(id), "project_id": rowcodec.String("p-1"),
				"title": rowcodec.String(title), "done": rowcodec.Bool(true), "estimate": rowcodec.Null(), "attachment": rowcodec.Null()})
		}
		req := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "7"), -1),
				ssptest.Upsert("tasks", "t-1", task(t, s.sch, "t-1", "p-1", "Milk"), -1)),
			ssptest.Commit("k2", ssptest.Upsert("tasks", "t-1", done("t-1", "Milk"), -1)),
			// Rejected (an undecodable row): plans nothing.
			ssptest.Commit("k3", ssptest.Upsert("tasks", "t-2", []byte{0xff}, -1)),
		}}
		resp, _ := s.sync(c, req)
		if resp.Results[0].Status != ssp2.PushApplied || resp.Results[1].Status != ssp2.PushApplied || resp.Results[2].Status != ssp2.PushRejected {
			t.Fatalf("%+v %+v %+v", resp.Results[0], resp.Results[1], resp.Results[2])
		}
		s.sync(c, req) // a replay plans nothing more
		rs, err := s.store.ListReactions(context.Background(), "default", nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range rs {
			got[r.IdempotencyKey] = fmt.Sprintf("%s v%d %s seq %d, %d attempts", r.Type, r.Version, r.Payload, r.Source.CommitSeq, r.MaxAttempts)
		}
		want := map[string]string{
			`["default","c1","k1","numbered-project:project"]`: `projects.numbered v1 {"number":7} seq 1, 3 attempts`,
			`["default","c1","k2","task-done:tasks:t-1:0"]`:    `tasks.done v1 {"task":"t-1","title":"Milk"} seq 2, 10 attempts`,
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("reactions\n %v\nwant\n %v", got, want)
		}

		// A project whose name is no number: the payload rule fails, and
		// so does the push, with nothing stored.
		rep := s.post(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k4", ssptest.Upsert("projects", "p-2", project(t, s.sch, "p-2", "alice", "boom"), -1))}}.Encode(t))
		if body := s.jsonError(rep, http.StatusInternalServerError, syncerr.InternalError); body["retryable"] != true {
			t.Fatalf("failed push: %s", rep.body)
		}
		if row, _ := s.store.GetRow(context.Background(), "default", "projects", "p-2"); row != nil {
			t.Fatal("the failed push's row landed")
		}
		if b, _ := s.store.LogBounds(context.Background(), "default"); b.MaxSeq != 2 {
			t.Fatalf("the log holds %d commits, want 2", b.MaxSeq)
		}
		if rs, _ := s.store.ListReactions(context.Background(), "default", nil, 10); len(rs) != 2 {
			t.Fatalf("%d reactions after the failed push", len(rs))
		}
		failed := s.logs.FilterMessage("reaction rule failed: the push fails, the client retries it").All()
		if len(failed) != 1 || failed[0].ContextMap()["rule"] != "reactions/numbered-project (payload)" || failed[0].ContextMap()["line"] != int64(15) {
			t.Fatalf("log lines %+v", failed)
		}
	})
}

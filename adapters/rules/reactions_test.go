package rules_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/adapters/rules"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// The test schema's tasks table: id, project_id, title, done, estimate
// (integer NULL), attachment (blob_ref NULL).

func task(id, title string, done bool) ports.RowValues {
	return ports.RowValues{"id": id, "project_id": "p-1", "title": title, "done": done, "estimate": nil, "attachment": nil}
}

func insert(i int, table, id string, row ports.RowValues) ports.OperationEvidence {
	return ports.OperationEvidence{OpIndex: i, Op: commit.OpUpsert, Table: table, RowID: id, Row: row}
}

func update(i int, table, id string, stored, row ports.RowValues) ports.OperationEvidence {
	return ports.OperationEvidence{OpIndex: i, Op: commit.OpUpsert, Table: table, RowID: id, Row: row, Stored: stored}
}

func remove(i int, table, id string, stored ports.RowValues) ports.OperationEvidence {
	return ports.OperationEvidence{OpIndex: i, Op: commit.OpDelete, Table: table, RowID: id, Stored: stored}
}

func commitOf(ops ...ports.OperationEvidence) ports.CommitValidation {
	return ports.CommitValidation{ClientID: "phone", ClientCommitID: "c-1", ActorID: "alice", Partition: "default", Operations: ops}
}

// planned is a reaction as a test expects it; payload as JSON text.
type planned struct {
	key, typ    string
	version     int32
	payload     string
	maxAttempts int
}

func plannedOf(t *testing.T, rs []ports.PlannedReaction) []planned {
	t.Helper()
	out := []planned{}
	for _, r := range rs {
		out = append(out, planned{r.Key, r.Type, r.Version, string(r.Payload), r.MaxAttempts})
	}
	return out
}

func TestReactionRules(t *testing.T) {
	r := parse(t, `
reactions:
  - name: task-done
    table: tasks
    on: [update]
    when: row.done && !stored.done
    type: tasks.done
    payload: '{"task": rowId, "title": row.title, "actor": actor, "partition": partition}'
  - name: task-created
    table: tasks
    on: [insert]
    type: tasks.created
    version: 2
    maxAttempts: 3
    payload: '{"task": rowId, "index": opIndex, "client": clientId, "commit": clientCommitId, "ops": size(ops)}'
  - name: task-deleted
    table: tasks
    on: [delete]
    key: rowId
    type: tasks.deleted
    payload: '{"task": rowId, "title": stored.title, "op": op}'
  - name: note-written
    table: notes
    on: [upsert]
    type: notes.written
    payload: '{"row": row, "nested": {"list": [1, 2.5, true, null, b"\x01"]}, "none": optional.none(), "some": optional.of("x")}'
`)
	pl := r.ReactionPlanner()
	if pl == nil || r.ReactionRules() != 4 || !reflect.DeepEqual(r.ReactionTypes(), []string{"tasks.done", "tasks.created", "tasks.deleted", "notes.written"}) {
		t.Fatalf("planner %v, %d rules, types %v", pl, r.ReactionRules(), r.ReactionTypes())
	}
	tests := []struct {
		name string
		c    ports.CommitValidation
		want []planned
	}{
		{"an insert plans the insert rule, keyed by name, table, row and operation",
			commitOf(insert(0, "tasks", "t-1", task("t-1", "Milk", false))),
			[]planned{{"task-created:tasks:t-1:0", "tasks.created", 2, `{"client":"phone","commit":"c-1","index":0,"ops":1,"task":"t-1"}`, 3}}},
		{"an update that completes a task plans the update rule",
			commitOf(update(0, "tasks", "t-1", task("t-1", "Milk", false), task("t-1", "Milk", true))),
			[]planned{{"task-done:tasks:t-1:0", "tasks.done", 1, `{"actor":"alice","partition":"default","task":"t-1","title":"Milk"}`, 0}}},
		{"an update for which when is false plans nothing",
			commitOf(update(0, "tasks", "t-1", task("t-1", "Milk", true), task("t-1", "Oat milk", true))),
			[]planned{}},
		{"a delete plans the delete rule under its own key",
			commitOf(remove(0, "tasks", "t-1", task("t-1", "Milk", true))),
			[]planned{{"task-deleted:t-1", "tasks.deleted", 1, `{"op":"delete","task":"t-1","title":"Milk"}`, 0}}},
		{"two operations on one row plan two reactions under the default key",
			commitOf(update(0, "tasks", "t-1", task("t-1", "Milk", false), task("t-1", "Milk", true)),
				update(1, "tasks", "t-1", task("t-1", "Milk", false), task("t-1", "Milk!", true))),
			[]planned{{"task-done:tasks:t-1:0", "tasks.done", 1, `{"actor":"alice","partition":"default","task":"t-1","title":"Milk"}`, 0},
				{"task-done:tasks:t-1:1", "tasks.done", 1, `{"actor":"alice","partition":"default","task":"t-1","title":"Milk!"}`, 0}}},
		{"a key planned twice in a commit plans once, the first",
			commitOf(remove(0, "tasks", "t-1", task("t-1", "First", true)), insert(1, "tasks", "t-2", task("t-2", "Other", false)),
				remove(2, "tasks", "t-1", task("t-1", "Second", true))),
			[]planned{{"task-deleted:t-1", "tasks.deleted", 1, `{"op":"delete","task":"t-1","title":"First"}`, 0},
				{"task-created:tasks:t-2:1", "tasks.created", 2, `{"client":"phone","commit":"c-1","index":1,"ops":3,"task":"t-2"}`, 3}}},
		{"every column type as JSON; bytes as base64, null as null",
			commitOf(insert(0, "notes", "n-1", note(map[string]any{"title": nil}))),
			[]planned{{"note-written:notes:n-1:0", "notes.written", 1,
				`{"nested":{"list":[1,2.5,true,null,"AQ=="]},"none":null,"row":{"blob":"AQI=","body":"body","count":3,"doc":"CQ==","done":false,"id":"n-1","meta":"{\"tag\":\"a\"}","score":2.5,"title":null},"some":"x"}`, 0}}},
		{"a table without reaction rules plans nothing",
			commitOf(insert(0, "projects", "p-1", ports.RowValues{"id": "p-1"})),
			[]planned{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pl.PlanReactions(context.Background(), tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if g := plannedOf(t, got); !reflect.DeepEqual(g, tc.want) {
				t.Fatalf("planned\n %+v\nwant\n %+v", g, tc.want)
			}
			for _, p := range got {
				if !json.Valid(p.Payload) {
					t.Fatalf("payload %s is not JSON", p.Payload)
				}
			}
		})
	}

	// The same commit plans the same reactions: keys and payloads are
	// deterministic, so a replay plans what the first delivery planned.
	c := commitOf(insert(0, "notes", "n-1", note(nil)), remove(1, "tasks", "t-1", task("t-1", "x", true)))
	a, err1 := pl.PlanReactions(context.Background(), c)
	b, err2 := pl.PlanReactions(context.Background(), c)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("two plans of one commit differ: %v %v", err1, err2)
	}
}

// TestReactionKeyBounds: a row id too long for a key is replaced by its
// hash, so the key stays within 256 bytes, distinct per row, the same
// on every plan.
func TestReactionKeyBounds(t *testing.T) {
	r := parse(t, `
reactions:
  - {name: created, table: tasks, on: [insert], type: tasks.created, payload: '{}'}
  - {name: keyed, table: tasks, on: [insert], key: 'rowId + rowId', type: tasks.keyed, payload: '{}'}
`)
	long1, long2 := strings.Repeat("a", 300), strings.Repeat("a", 299)+"b"
	got, err := r.ReactionPlanner().PlanReactions(context.Background(),
		commitOf(insert(0, "tasks", long1, task(long1, "x", false)), insert(1, "tasks", long2, task(long2, "x", false))))
	if err != nil || len(got) != 4 {
		t.Fatalf("%d reactions, %v", len(got), err)
	}
	seen := map[string]bool{}
	for _, p := range got {
		if len(p.Key) > 256 || seen[p.Key] || !strings.Contains(p.Key, ":sha256:") {
			t.Fatalf("key %q (%d bytes)", p.Key, len(p.Key))
		}
		seen[p.Key] = true
	}
	again, _ := r.ReactionPlanner().PlanReactions(context.Background(),
		commitOf(insert(0, "tasks", long1, task(long1, "x", false)), insert(1, "tasks", long2, task(long2, "x", false))))
	if !reflect.DeepEqual(got, again) {
		t.Fatal("hashed keys differ between plans")
	}
}

func TestReactionLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		// want: "line|rule|fragment", as in TestLoadErrors.
		want []string
	}{
		{"not a list", "reactions: {a: b}\n", []string{"1||reactions: want a list of rules"}},
		{"unknown table", `
reactions:
  - name: done
    table: nope
    type: a.done
    payload: '{}'
`, []string{`4|reactions/done|table "nope" is not in the served schema (tables: projects, tasks, notes)`}},
		{"unknown column in when", `
reactions:
  - name: done
    table: tasks
    when: row.dnoe
    type: a.done
    payload: '{}'
`, []string{"5|reactions/done|undefined field 'dnoe' (column 14)"}},
		{"unknown column in a payload block, on its second line", `
reactions:
  - name: done
    table: tasks
    type: a.done
    payload: |
      {"task": rowId,
       "title": row.titel}
`, []string{"8|reactions/done|undefined field 'titel'"}},
		{"when not a bool", `
reactions:
  - {name: done, table: tasks, when: row.title, type: a.done, payload: '{}'}
`, []string{"3|reactions/done|when must be a bool, this one is a string"}},
		{"payload not a map", `
reactions:
  - {name: done, table: tasks, type: a.done, payload: '[rowId]'}
`, []string{"3|reactions/done|payload must be a map with string keys"}},
		{"payload with int keys", `
reactions:
  - {name: done, table: tasks, type: a.done, payload: '{1: rowId}'}
`, []string{"3|reactions/done|payload must be a map with string keys"}},
		{"key not a string", `
reactions:
  - {name: done, table: tasks, key: opIndex, type: a.done, payload: '{}'}
`, []string{"3|reactions/done|key must be a string, this one is a int"}},
		{"bad type, version, attempts and on", `
reactions:
  - name: done
    table: tasks
    on: [insert, upsrt]
    type: 9lives
    version: 0
    maxAttempts: 101
    payload: '{}'
`, []string{`5|reactions/done|on: "upsrt": want insert, update, upsert or delete`, `6|reactions/done|type "9lives": want a code-like name`,
			"7|reactions/done|version 0: want a positive whole number", "8|reactions/done|maxAttempts 101: want 1..100"}},
		{"missing keys", `
reactions:
  - {when: "true"}
`, []string{"3|reactions[0]|name is required", "3|reactions[0]|table is required", "3|reactions[0]|type is required", "3|reactions[0]|payload is required"}},
		{"unknown key and duplicate names", `
reactions:
  - {name: a, table: tasks, type: a.done, payload: '{}', code: x}
  - {name: b, table: tasks, type: a.done, payload: '{}'}
  - {name: b, table: tasks, type: a.done, payload: '{}'}
`, []string{`3|reactions/a|unknown key "code"`, "5|reactions/b|duplicate rule name in reactions"}},
		{"a name too long for a key", "reactions:\n  - {name: " + strings.Repeat("n", 129) + ", table: tasks, type: a.done, payload: '{}'}\n",
			[]string{"2|reactions[0]|name: at most 128 bytes"}},
		{"an operation field that does not exist", `
reactions:
  - {name: a, table: tasks, when: 'ops.all(o, o.tabel != "")', type: a.done, payload: '{}'}
`, []string{"3|reactions/a|undefined field 'tabel'"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rules.Parse("rules.yaml", []byte(tc.src), rules.Options{Schema: ssptest.Schema(t)})
			if err == nil {
				t.Fatal("loaded")
			}
			var got []*rules.Error
			collect(err, &got)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(got), len(tc.want), err)
			}
			for i, w := range tc.want {
				parts := strings.SplitN(w, "|", 3)
				e := got[i]
				if e.File != "rules.yaml" || parts[0] != strconv.Itoa(e.Line) || parts[1] != e.Rule || !strings.Contains(e.Msg, parts[2]) {
					t.Errorf("error %d = %q (line %d, rule %q), want line %s, rule %q, containing %q", i, e.Error(), e.Line, e.Rule, parts[0], parts[1], parts[2])
				}
			}
		})
	}
}

// TestReactionFailures: a reaction rule that cannot plan fails the push
// (a *RuleError, which the pipeline answers as a server failure), and
// its error log line names the file, line, rule and cause, never row
// data.
func TestReactionFailures(t *testing.T) {
	deep := strings.Repeat(`{"a": `, 16) + "1" + strings.Repeat("}", 16)
	tests := []struct {
		name    string
		rule    string
		c       ports.CommitValidation
		line    int
		ruleID  string
		cause   string
		costCut bool
	}{
		{"when reads a field of a null row", `{name: r, table: tasks, when: stored.done, type: a.b, payload: '{}'}`,
			commitOf(insert(0, "tasks", "t-1", task("t-1", "secret-title", false))), 3, "reactions/r (when)", "evaluation error", false},
		{"key fails", `{name: r, table: tasks, key: 'string(int(row.title))', type: a.b, payload: '{}'}`,
			commitOf(insert(0, "tasks", "t-1", task("t-1", "secret-title", false))), 3, "reactions/r (key)", "evaluation error", false},
		{"payload is not a map when it runs", `{name: r, table: tasks, type: a.b, payload: 'dyn(row.title)'}`,
			commitOf(insert(0, "tasks", "t-1", task("t-1", "secret-title", false))), 3, "reactions/r (payload)", "the payload is a string, not a map", false},
		{"payload larger than 64 KiB", `{name: r, table: tasks, type: a.b, payload: '{"t": row.title}'}`,
			commitOf(insert(0, "tasks", "t-1", task("t-1", strings.Repeat("s", 64<<10), false))), 3, "reactions/r (payload)", "the payload is 65544 bytes of JSON, at most 65536", false},
		{"payload of 16 levels is fine, 17 is too deep", `{name: r, table: tasks, type: a.b, payload: '{"x": ` + deep + `}'}`,
			commitOf(insert(0, "tasks", "t-1", task("t-1", "secret-title", false))), 3, "reactions/r (payload)", "the payload is deeper than 16 levels", false},
		{"payload with a NaN", `{name: r, table: tasks, type: a.b, payload: '{"x": 0.0 / 0.0}'}`,
			commitOf(insert(0, "tasks", "t-1", task("t-1", "secret-title", false))), 3, "reactions/r (payload)", "NaN", false},
		{"more than 100 reactions in a commit", `{name: r, table: tasks, type: a.b, payload: '{}'}`,
			commitOf(manyInserts(101)...), 3, "reactions/r (payload)", "the commit plans more than 100 reactions", false},
		{"cost limit", `{name: r, table: tasks, type: a.b, payload: '{"n": [0,1,2,3,4,5,6,7,8,9].map(a, [0,1,2,3,4,5,6,7,8,9].map(b, [0,1,2,3,4,5,6,7,8,9].map(c, [0,1,2,3,4,5,6,7,8,9].map(d, [0,1,2,3,4,5,6,7,8,9].map(e, a+b+c+d+e)))))}'}`,
			commitOf(insert(0, "tasks", "t-1", task("t-1", "secret-title", false))), 3, "reactions/r (payload)", "cost limit 100000 exceeded", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			r, err := rules.Parse("rules.yaml", []byte("\nreactions:\n  - "+tc.rule+"\n"), rules.Options{Schema: ssptest.Schema(t), Log: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.ReactionPlanner().PlanReactions(context.Background(), tc.c)
			var re *rules.RuleError
			if !errors.As(err, &re) || re.Rule != tc.ruleID || re.Line != tc.line || re.File != "rules.yaml" || got != nil || rules.IsCostLimit(err) != tc.costCut {
				t.Fatalf("got %v, %#v; want a failure of %s at line %d", got, err, tc.ruleID, tc.line)
			}
			errs := logs.FilterLevelExact(zap.ErrorLevel).All()
			if len(errs) != 1 {
				t.Fatalf("error log lines %+v", errs)
			}
			f := errs[0].ContextMap()
			if f["rule"] != tc.ruleID || f["rules_file"] != "rules.yaml" || f["line"] != int64(tc.line) || f["partition"] != "default" || !strings.Contains(fmt.Sprint(f["cause"]), tc.cause) ||
				!strings.Contains(errs[0].Message, "reaction rule failed") {
				t.Fatalf("log line %q %v", errs[0].Message, f)
			}
			if strings.Contains(errs[0].Message+" "+stringMap(f), "secret-title") {
				t.Fatalf("the error line quotes row data: %+v", errs[0])
			}
		})
	}

	// Sixteen levels, the bound itself, plan.
	r := parse(t, "reactions:\n  - {name: r, table: tasks, type: a.b, payload: '"+deep+"'}\n")
	if got, err := r.ReactionPlanner().PlanReactions(context.Background(), commitOf(manyInserts(100)...)); err != nil || len(got) != 100 {
		t.Fatalf("16 levels, 100 reactions: %d, %v", len(got), err)
	}

	// A push that ends stops the planner with its context's error.
	r = parse(t, "reactions:\n  - {name: r, table: tasks, type: a.b, payload: '"+tests[len(tests)-1].rule[len("{name: r, table: tasks, type: a.b, payload: '"):]+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.ReactionPlanner().PlanReactions(ctx, commitOf(manyInserts(1)...)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled push: %v", err)
	}
}

func manyInserts(n int) []ports.OperationEvidence {
	out := make([]ports.OperationEvidence, n)
	for i := range out {
		id := fmt.Sprint("t-", i)
		out[i] = insert(i, "tasks", id, task(id, "x", false))
	}
	return out
}

// TestReactionsOnly: a file of reaction rules alone loads, with no
// validators and no scopes rule; a rule without on plans for every
// operation kind.
func TestReactionsOnly(t *testing.T) {
	r := parse(t, "reactions:\n  - {name: r, table: tasks, type: a.b, payload: '{\"op\": op, \"new\": stored == null}'}\n")
	if r.ReactionPlanner() == nil || r.ScopeResolver() != nil || r.CommitValidator() != nil || len(r.RowValidators()) != 0 {
		t.Fatal("a reactions-only file")
	}
	got, err := r.ReactionPlanner().PlanReactions(context.Background(), commitOf(insert(0, "tasks", "t-1", task("t-1", "x", false)),
		update(1, "tasks", "t-1", task("t-1", "x", false), task("t-1", "y", false)), remove(2, "tasks", "t-1", task("t-1", "y", false))))
	want := []planned{{"r:tasks:t-1:0", "a.b", 1, `{"new":true,"op":"upsert"}`, 0}, {"r:tasks:t-1:1", "a.b", 1, `{"new":false,"op":"upsert"}`, 0},
		{"r:tasks:t-1:2", "a.b", 1, `{"new":false,"op":"delete"}`, 0}}
	if g := plannedOf(t, got); err != nil || !reflect.DeepEqual(g, want) {
		t.Fatalf("planned %+v, %v", g, err)
	}
	if parse(t, "validators: {notes: [{name: a, rule: 'true', code: app.a, message: m}]}\n").ReactionPlanner() != nil {
		t.Fatal("a file without reaction rules has a planner")
	}
}

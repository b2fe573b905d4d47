package rules_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/adapters/rules"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// The test schema's notes table has a column of every type:
// id string, title string NULL, body string, count integer NULL,
// score float, done boolean, meta json NULL, blob bytes NULL, doc crdt NULL.

func parse(t *testing.T, src string) *rules.Rules {
	t.Helper()
	r, err := rules.Parse("rules.yaml", []byte(src), rules.Options{Schema: ssptest.Schema(t)})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return r
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		// want are the errors, each as "line|rule|fragment" (rule may
		// be empty), in the order reported.
		want []string
	}{
		{"not YAML", "validators: [", []string{"1||not YAML"}},
		{"empty file", "", []string{"1||empty file"}},
		{"not a mapping", "- a\n- b\n", []string{"1||want a mapping"}},
		{"no rules", "version: 1\n", []string{"1||no rules"}},
		{"unknown key", "scope: '{}'\n", []string{`1||unknown key "scope"`}},
		{"newer version", "version: 2\nscopes: '{}'\n", []string{"1||version 2"}},
		{"cost limit out of range", "costLimit: 0\nscopes: '{}'\n", []string{"1||costLimit 0"}},
		{"cost limit not a number", "costLimit: lots\nscopes: '{}'\n", []string{`1||"lots": want a whole number`}},
		{"unknown table", `
validators:
  nope:
    - {name: a, rule: "true", code: app.a, message: m}
`, []string{`3||table "nope" is not in the served schema (tables: projects, tasks, notes)`}},
		{"unknown column", `
validators:
  notes:
    - name: title-length
      rule: size(row.titel) < 10
      code: app.a
      message: m
`, []string{"5|validators.notes/title-length|undefined field 'titel' (column 21)"}},
		{"unknown column in a block scalar, on its second line", `
validators:
  notes:
    - name: two-lines
      rule: |
        size(row.body) < 10 &&
          stored.bdy == ""
      code: app.a
      message: m
`, []string{"7|validators.notes/two-lines|undefined field 'bdy'"}},
		{"not a bool", `
validators:
  notes:
    - {name: size, rule: size(row.body), code: app.a, message: m}
`, []string{"4|validators.notes/size|must be a bool, this one is a int"}},
		{"a column compared with the wrong type", `
validators:
  notes:
    - {name: done, rule: row.done == "yes", code: app.a, message: m}
`, []string{"4|validators.notes/done|no matching overload"}},
		{"scopes of the wrong type", "scopes: actor\n", []string{"1|scopes|must be a map(string, list(string))"}},
		{"scopes with a list of ints", "scopes: '{\"owner\": [1]}'\n", []string{"1|scopes|must be a map(string, list(string))"}},
		{"scopes with an undeclared variable", "scopes: '{\"owner\": [actor], \"projct_id\": []}'\n",
			[]string{`1|scopes|scope variable "projct_id" is not declared by any table (declared: id, owner, project_id) (column 29)`}},
		{"unknown variable", "scopes: '{\"owner\": [user]}'\n", []string{"1|scopes|undeclared reference to 'user'"}},
		{"reserved code", `
validators:
  notes:
    - {name: a, rule: "true", code: sync.forbidden, message: m}
`, []string{"4|validators.notes/a|reserved protocol prefix"}},
		{"bad details", `
validators:
  notes:
    - {name: a, rule: "true", code: app.a, message: m, details: {reason: "Not A Token"}}
`, []string{"4|validators.notes/a|reason"}},
		{"missing fields", `
validators:
  notes:
    - {rule: "true"}
`, []string{"4|validators.notes[0]|name is required", "4|validators.notes[0]|code is required", "4|validators.notes[0]|message is required"}},
		{"empty message", `
validators:
  notes:
    - {name: a, rule: "true", code: app.a, message: ""}
`, []string{"4|validators.notes/a|message: want the text"}},
		{"duplicate names", `
validators:
  notes:
    - {name: a, rule: "true", code: app.a, message: m}
    - {name: a, rule: "true", code: app.a, message: m}
`, []string{"5|validators.notes/a|duplicate rule name"}},
		{"opIndex on a row rule", `
validators:
  notes:
    - {name: a, rule: "true", opIndex: "0", code: app.a, message: m}
`, []string{"4|validators.notes/a|opIndex: only commit validators"}},
		{"on of a commit rule", `
commitValidators:
  - {name: a, rule: "true", on: [upsert], code: app.a, message: m}
`, []string{"3|commitValidators/a|on: only row validators"}},
		{"unknown operation kind", `
validators:
  notes:
    - {name: a, on: [update], rule: "true", code: app.a, message: m}
`, []string{`4|validators.notes/a|on: "update": want upsert or delete`}},
		{"opIndex not an int", `
commitValidators:
  - {name: a, rule: "true", opIndex: "'first'", code: app.a, message: m}
`, []string{"3|commitValidators/a|opIndex must be an int"}},
		{"a commit rule naming an unknown operation field", `
commitValidators:
  - {name: a, rule: 'ops.all(o, o.tabel != "")', code: app.a, message: m}
`, []string{"3|commitValidators/a|undefined field 'tabel'"}},
		{"every problem is reported", `
scopes: "1"
validators:
  notes:
    - {name: a, rule: row.nope, code: app.a, message: m}
    - {name: b, rule: "true", code: "", message: m}
`, []string{"2|scopes|must be a map", "5|validators.notes/a|undefined field 'nope'", "6|validators.notes/b|host rejection code is empty"}},
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
				if !strings.HasPrefix(e.Error(), "rules.yaml:"+parts[0]+": ") {
					t.Errorf("error text %q does not start with the file and line", e.Error())
				}
			}
		})
	}
}

func collect(err error, out *[]*rules.Error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			collect(e, out)
		}
		return
	}
	var e *rules.Error
	if errors.As(err, &e) {
		*out = append(*out, e)
	}
}

// note is a notes row with every column set; with overrides.
func note(over map[string]any) ports.RowValues {
	r := ports.RowValues{"id": "n-1", "title": "Title", "body": "body", "count": int64(3), "score": 2.5,
		"done": false, "meta": `{"tag":"a"}`, "blob": []byte{0x01, 0x02}, "doc": []byte{0x09}}
	for k, v := range over {
		r[k] = v
	}
	return r
}

// goRejection is what a Go validator of the same meaning returns.
func goRejection(t *testing.T, code, msg string, details *ssp2.RejectionDetails) error {
	t.Helper()
	r, err := ports.NewValidationRejection(code, msg, details)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRowRules(t *testing.T) {
	r := parse(t, `
validators:
  notes:
    - name: strings
      rule: size(row.body) <= 10 && row.body.startsWith("b")
      code: app.body
      message: a body is at most 10 characters and starts with b
      details: {fieldPaths: [body], reason: body_invalid}
    - name: ints
      rule: row.count == null || (row.count >= 0 && row.count < 100)
      code: app.count
      message: count in 0..99
    - name: floats
      rule: row.score >= 0.0 && row.score <= 10
      code: app.score
      message: score in 0..10
    - name: bools
      rule: "!row.done || row.title != null"
      code: app.done
      message: a done note has a title
    - name: bytes
      rule: row.blob == null || size(row.blob) <= 4
      code: app.blob
      message: blob of at most 4 bytes
    - name: nulls
      rule: has(row.title) == (row.title != null)
      code: app.null
      message: has() and null agree
    - name: json-text
      rule: row.meta == null || row.meta.contains("tag")
      code: app.meta
      message: meta has a tag
    - name: crdt-bytes
      rule: row.doc == null || row.doc != b""
      code: app.doc
      message: doc not empty
    - name: transition
      rule: stored == null || stored.body == row.body || !stored.done
      code: app.frozen
      message: a done note's body is frozen
    - name: actor-and-partition
      rule: actor != "mallory" && partition != "closed" && rowId != "forbidden"
      code: app.who
      message: not here
    - name: only-owner-deletes
      on: [delete]
      rule: stored.title != "keep" && op == "delete"
      code: app.keep
      message: this note is kept
`)
	vs := r.RowValidators()
	if len(vs) != 1 || vs[0].Table() != "notes" {
		t.Fatalf("validators %+v", vs)
	}
	v := vs[0]
	upsert := func(row, stored ports.RowValues) ports.RowValidation {
		return ports.RowValidation{Op: commit.OpUpsert, Table: "notes", RowID: "n-1", Row: row, Stored: stored, ActorID: "alice", Partition: "p"}
	}
	tests := []struct {
		name string
		in   ports.RowValidation
		want error
	}{
		{"every type accepted", upsert(note(nil), nil), nil},
		{"all nullable columns null", upsert(note(map[string]any{"title": nil, "count": nil, "meta": nil, "blob": nil, "doc": nil}), nil), nil},
		{"an absent column reads as null", upsert(func() ports.RowValues { n := note(nil); delete(n, "count"); return n }(), nil), nil},
		{"string too long", upsert(note(map[string]any{"body": "bbbbbbbbbbbb"}), nil),
			goRejection(t, "app.body", "a body is at most 10 characters and starts with b", &ssp2.RejectionDetails{FieldPaths: []string{"body"}, Reason: "body_invalid"})},
		{"string counted in characters, not bytes", upsert(note(map[string]any{"body": "bäääääääää"}), nil), nil},
		{"int out of range", upsert(note(map[string]any{"count": int64(100)}), nil), goRejection(t, "app.count", "count in 0..99", nil)},
		{"negative int", upsert(note(map[string]any{"count": int64(-1)}), nil), goRejection(t, "app.count", "count in 0..99", nil)},
		{"float out of range", upsert(note(map[string]any{"score": 10.5}), nil), goRejection(t, "app.score", "score in 0..10", nil)},
		{"bool and null together", upsert(note(map[string]any{"done": true, "title": nil}), nil), goRejection(t, "app.done", "a done note has a title", nil)},
		{"bytes too long", upsert(note(map[string]any{"blob": []byte("12345")}), nil), goRejection(t, "app.blob", "blob of at most 4 bytes", nil)},
		{"json as its text", upsert(note(map[string]any{"meta": `{"other":1}`}), nil), goRejection(t, "app.meta", "meta has a tag", nil)},
		{"crdt as bytes", upsert(note(map[string]any{"doc": []byte{}}), nil), goRejection(t, "app.doc", "doc not empty", nil)},
		{"stored row of an update", upsert(note(map[string]any{"body": "b2"}), note(map[string]any{"done": true})), goRejection(t, "app.frozen", "a done note's body is frozen", nil)},
		{"stored row, unchanged body", upsert(note(nil), note(map[string]any{"done": true})), nil},
		{"actor", func() ports.RowValidation { v := upsert(note(nil), nil); v.ActorID = "mallory"; return v }(), goRejection(t, "app.who", "not here", nil)},
		{"partition", func() ports.RowValidation { v := upsert(note(nil), nil); v.Partition = "closed"; return v }(), goRejection(t, "app.who", "not here", nil)},
		{"row id", func() ports.RowValidation { v := upsert(note(nil), nil); v.RowID = "forbidden"; return v }(), goRejection(t, "app.who", "not here", nil)},
		{"the first rule that fails decides", upsert(note(map[string]any{"body": "x", "count": int64(500)}), nil),
			goRejection(t, "app.body", "a body is at most 10 characters and starts with b", &ssp2.RejectionDetails{FieldPaths: []string{"body"}, Reason: "body_invalid"})},
		{"upsert rules skip deletes", ports.RowValidation{Op: commit.OpDelete, Table: "notes", RowID: "n-1", Stored: note(map[string]any{"body": "way too long a body"})}, nil},
		{"delete rule", ports.RowValidation{Op: commit.OpDelete, Table: "notes", RowID: "n-1", Stored: note(map[string]any{"title": "keep"})}, goRejection(t, "app.keep", "this note is kept", nil)},
		{"delete rule accepts", ports.RowValidation{Op: commit.OpDelete, Table: "notes", RowID: "n-1", Stored: note(nil)}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := v.ValidateRow(context.Background(), tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestRuleFailures: a rule that cannot decide is a plain error (the push
// pipeline's sync.constraint_violation), never a rejection with the rule's
// code, and its log line names the rule but not CEL's text.
func TestRuleFailures(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	r, err := rules.Parse("rules.yaml", []byte(`
validators:
  notes:
    - name: reads-stored
      rule: stored.body == "secret-body"
      code: app.a
      message: m
    - name: on-delete-reads-row
      on: [delete]
      rule: row.body != ""
      code: app.a
      message: m
    - name: converts
      rule: int(row.body) > 0
      code: app.a
      message: m
`), rules.Options{Schema: ssptest.Schema(t), Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	v := r.RowValidators()[0]
	for name, in := range map[string]ports.RowValidation{
		"stored is null on an insert": {Op: commit.OpUpsert, Table: "notes", Row: note(nil)},
		"row is null on a delete":     {Op: commit.OpDelete, Table: "notes", Stored: note(nil)},
	} {
		err := v.ValidateRow(context.Background(), in)
		var re *rules.RuleError
		var rej *ports.ValidationRejection
		if !errors.As(err, &re) || errors.As(err, &rej) || rules.IsCostLimit(err) {
			t.Fatalf("%s: %#v", name, err)
		}
	}
	err = v.ValidateRow(context.Background(), ports.RowValidation{Op: commit.OpUpsert, Table: "notes", Row: note(map[string]any{"body": "secret-body"}),
		Stored: note(map[string]any{"body": "secret-body"})})
	var re *rules.RuleError
	if !errors.As(err, &re) || re.Rule != "validators.notes/converts" || re.Line != 13 {
		t.Fatalf("conversion: %#v", err)
	}
	warns := logs.FilterLevelExact(zap.WarnLevel).All()
	if len(warns) != 3 || warns[2].ContextMap()["rule"] != "validators.notes/converts" || warns[2].ContextMap()["rules_file"] != "rules.yaml" {
		t.Fatalf("warnings %+v", warns)
	}
	for _, w := range warns {
		if strings.Contains(w.Message+" "+stringMap(w.ContextMap()), "secret-body") {
			t.Fatalf("a warning quotes row data: %+v", w)
		}
	}
}

func stringMap(m map[string]any) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k)
		b.WriteString("=")
		if s, ok := v.(string); ok {
			b.WriteString(s)
		}
		b.WriteString(" ")
	}
	return b.String()
}

func TestCommitRules(t *testing.T) {
	r := parse(t, `
commitValidators:
  - name: few-deletes
    rule: ops.filter(o, o.op == "delete").size() <= 2
    opIndex: ops.filter(o, o.op == "delete")[2].index
    code: app.deletes
    message: at most 2 deletes
  - name: no-orphan-tasks
    rule: ops.all(t, t.table != "tasks" || t.op != "upsert" || t.row.project_id == "p-1" || ops.exists(p, p.table == "projects" && p.rowId == t.row.project_id))
    opIndex: ops.filter(t, t.table == "tasks" && t.op == "upsert" && t.row.project_id != "p-1")[0].index
    code: app.orphan
    message: a task's project is written in the same commit
  - name: fresh-tasks
    rule: ops.all(o, o.table != "tasks" || o.stored == null || o.stored.done == false)
    code: app.fresh
    message: done tasks are final
  - name: who
    rule: actor != "mallory" && partition != "closed" && clientId != "c-bad" && clientCommitId != "k-bad"
    code: app.who
    message: not here
`)
	v := r.CommitValidator()
	task := func(i int, id, project string) ports.OperationEvidence {
		return ports.OperationEvidence{OpIndex: i, Op: commit.OpUpsert, Table: "tasks", RowID: id,
			Row: ports.RowValues{"id": id, "project_id": project, "title": "t", "done": false, "estimate": nil, "attachment": nil}}
	}
	del := func(i int) ports.OperationEvidence {
		return ports.OperationEvidence{OpIndex: i, Op: commit.OpDelete, Table: "notes", RowID: "n"}
	}
	in := func(ops ...ports.OperationEvidence) ports.CommitValidation {
		return ports.CommitValidation{ClientID: "c1", ClientCommitID: "k1", ActorID: "alice", Partition: "p", Operations: ops}
	}
	rejectAt := func(i int, code, msg string) error {
		r, err := ports.RejectOp(i, code, msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name string
		in   ports.CommitValidation
		want error
	}{
		{"empty commit", in(), nil},
		{"within the bound", in(del(0), task(1, "t1", "p-1"), del(2)), nil},
		{"attributed to the third delete", in(del(0), del(1), task(2, "t1", "p-1"), del(3), del(4)), rejectAt(3, "app.deletes", "at most 2 deletes")},
		{"parent in the same commit", in(ports.OperationEvidence{OpIndex: 0, Op: commit.OpUpsert, Table: "projects", RowID: "p-2"}, task(1, "t1", "p-2")), nil},
		{"orphan attributed to its operation", in(task(0, "t0", "p-1"), task(1, "t1", "p-7")), rejectAt(1, "app.orphan", "a task's project is written in the same commit")},
		{"stored rows", in(func() ports.OperationEvidence {
			o := task(0, "t0", "p-1")
			o.Stored = ports.RowValues{"id": "t0", "project_id": "p-1", "title": "t", "done": true, "estimate": int64(1), "attachment": nil}
			return o
		}()), rejectAt(0, "app.fresh", "done tasks are final")},
		{"without opIndex the first operation", func() ports.CommitValidation { c := in(del(0)); c.ActorID = "mallory"; return c }(), rejectAt(0, "app.who", "not here")},
		{"client id", func() ports.CommitValidation { c := in(del(0)); c.ClientID = "c-bad"; return c }(), rejectAt(0, "app.who", "not here")},
		{"client commit id", func() ports.CommitValidation { c := in(del(0)); c.ClientCommitID = "k-bad"; return c }(), rejectAt(0, "app.who", "not here")},
		{"partition", func() ports.CommitValidation { c := in(del(0)); c.Partition = "closed"; return c }(), rejectAt(0, "app.who", "not here")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := v.ValidateCommit(context.Background(), tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	// An opIndex that cannot be computed fails the rule, it does not
	// reject at an invented index.
	bad := parse(t, `
commitValidators:
  - name: bad-index
    rule: "false"
    opIndex: ops[5].index
    code: app.x
    message: m
`)
	var re *rules.RuleError
	if err := bad.CommitValidator().ValidateCommit(context.Background(), in(del(0))); !errors.As(err, &re) || re.Rule != "commitValidators/bad-index (opIndex)" {
		t.Fatalf("opIndex out of range: %#v", err)
	}
}

func TestScopes(t *testing.T) {
	r := parse(t, `
scopes: |
  {
    "owner": [actor],
    "project_id": claims.?projects.orValue([]).map(p, string(p)),
    "id": claims.?admin.orValue(false) ? ["*"] : []
  }
`)
	res := r.ScopeResolver()
	req := ports.ScopeRequest{ActorID: "alice", Partition: "p", ClientID: "c1"}
	with := func(claims map[string]any) context.Context {
		return ports.WithIdentity(context.Background(), ports.Identity{ActorID: "alice", Partition: "p", Claims: claims})
	}
	tests := []struct {
		name string
		ctx  context.Context
		want scopes.Allowed
		fail bool
	}{
		{"claims", with(map[string]any{"projects": []any{"p-1", "p-2"}}), scopes.Allowed{"owner": {"alice"}, "project_id": {"p-1", "p-2"}, "id": {}}, false},
		{"numbers in a claim", with(map[string]any{"projects": []any{float64(7)}, "admin": true}), scopes.Allowed{"owner": {"alice"}, "project_id": {"7"}, "id": {"*"}}, false},
		{"no claims (dev auth)", with(nil), scopes.Allowed{"owner": {"alice"}, "project_id": {}, "id": {}}, false},
		{"a claim of the wrong shape", with(map[string]any{"projects": "p-1"}), nil, true},
		{"no identity", context.Background(), nil, true},
		{"another actor's identity", ports.WithIdentity(context.Background(), ports.Identity{ActorID: "bob", Partition: "p"}), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := res.ResolveScopes(tc.ctx, req)
			if tc.fail {
				if err == nil || ports.IsResolverOutage(err) {
					t.Fatalf("got %v, %v; want a failure (not an outage)", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	// A dyn answer is checked at run time.
	dyn := parse(t, "scopes: 'claims.grants'\n").ScopeResolver()
	for name, c := range map[string]struct {
		grants any
		fail   bool
	}{
		"a map of string lists": {map[string]any{"owner": []any{"a"}}, false},
		"a string":              {"owner", true},
		"a list of ints":        {map[string]any{"owner": []any{1}}, true},
		"a scalar value":        {map[string]any{"owner": "a"}, true},
	} {
		_, err := dyn.ResolveScopes(with(map[string]any{"grants": c.grants}), req)
		if (err != nil) != c.fail {
			t.Errorf("%s: err %v", name, err)
		}
	}
	if parse(t, "validators: {notes: [{name: a, rule: 'true', code: app.a, message: m}]}\n").ScopeResolver() != nil {
		t.Fatal("a file without a scopes rule has a resolver")
	}
}

// TestCostLimit: a rule that would run long stops at its cost limit,
// quickly, as a rule failure; so does a cancelled push.
func TestCostLimit(t *testing.T) {
	nested := `[0,1,2,3,4,5,6,7,8,9].all(a, [0,1,2,3,4,5,6,7,8,9].all(b, [0,1,2,3,4,5,6,7,8,9].all(c,
          [0,1,2,3,4,5,6,7,8,9].all(d, [0,1,2,3,4,5,6,7,8,9].all(e, [0,1,2,3,4,5,6,7,8,9].all(f, a+b+c+d+e+f >= 0))))))`
	tests := []struct {
		name   string
		limit  string
		rule   string
		within bool
	}{
		{"default limit, a million iterations", "", nested, false},
		{"a small limit, a cheap rule", "costLimit: 20\n", "size(row.body) < 100", true},
		{"a small limit, a little more", "costLimit: 20\n", "row.body.split('o').map(s, size(s)).all(n, n < 100) && row.body.contains('x') == false && size(row.body) < 100", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := parse(t, tc.limit+`
validators:
  notes:
    - name: heavy
      rule: |
        `+tc.rule+`
      code: app.heavy
      message: m
`)
			v := r.RowValidators()[0]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // only to stop a hung test
			defer cancel()
			err := v.ValidateRow(ctx, ports.RowValidation{Op: commit.OpUpsert, Table: "notes", Row: note(map[string]any{"body": "boooooooo"})})
			if tc.within {
				if err != nil {
					t.Fatalf("within the limit: %v", err)
				}
				return
			}
			var re *rules.RuleError
			if !rules.IsCostLimit(err) || !errors.As(err, &re) || re.Rule != "validators.notes/heavy" {
				t.Fatalf("got %#v, want the cost limit", err)
			}
		})
	}
	r := parse(t, "validators:\n  notes:\n    - name: heavy\n      rule: |\n        "+nested+"\n      code: app.heavy\n      message: m\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.RowValidators()[0].ValidateRow(ctx, ports.RowValidation{Op: commit.OpUpsert, Table: "notes", Row: note(nil)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled push: %v", err)
	}
}

func BenchmarkRowRule(b *testing.B) {
	r, err := rules.Parse("rules.yaml", []byte(`
validators:
  tasks:
    - name: title-length
      rule: size(row.title) >= 1 && size(row.title) <= 200
      code: app.title_length
      message: a title has 1 to 200 characters
`), rules.Options{Schema: ssptest.Schema(b)})
	if err != nil {
		b.Fatal(err)
	}
	v := r.RowValidators()[0]
	in := ports.RowValidation{Op: commit.OpUpsert, Table: "tasks", RowID: "t-1", ActorID: "alice", Partition: "default",
		Row: ports.RowValues{"id": "t-1", "project_id": "p-1", "title": "Buy milk", "done": false, "estimate": nil, "attachment": nil}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := v.ValidateRow(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

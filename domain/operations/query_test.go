package operations_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

const queryIR = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{"version": 1, "migrations": []}],
  "tables": [
    {"name": "tasks", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "project_id", "type": "string", "nullable": false},
       {"name": "estimate", "type": "integer", "nullable": true},
       {"name": "score", "type": "float", "nullable": false},
       {"name": "done", "type": "boolean", "nullable": false},
       {"name": "meta", "type": "json", "nullable": true},
       {"name": "blob", "type": "bytes", "nullable": true}],
     "scopes": ["project:{project_id}"]},
    {"name": "raw", "primaryKey": "id", "materialize": false,
     "columns": [{"name": "id", "type": "string", "nullable": false}],
     "scopes": ["project:{id}"]}
  ],
  "subscriptions": []
}`

func querySchema(t *testing.T) *schema.Schema {
	t.Helper()
	s, err := schema.Load([]byte(queryIR))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCompileRefusesInvalidSpecs(t *testing.T) {
	sc := querySchema(t)
	base := operations.QuerySpec{ID: "q", Table: "tasks", MaxRows: 10}
	tests := []struct {
		name string
		edit func(*operations.QuerySpec)
		want string
	}{
		{"empty id", func(q *operations.QuerySpec) { q.ID = "" }, "empty id"},
		{"unknown table", func(q *operations.QuerySpec) { q.Table = "nope" }, "unknown table"},
		{"table not materialized", func(q *operations.QuerySpec) { q.Table = "raw" }, "not materialized"},
		{"maxRows 0", func(q *operations.QuerySpec) { q.MaxRows = 0 }, "maxRows"},
		{"maxRows past 10,000", func(q *operations.QuerySpec) { q.MaxRows = 10001 }, "maxRows"},
		{"unknown result column", func(q *operations.QuerySpec) { q.Columns = []string{"nope"} }, "unknown result column"},
		{"duplicate result column", func(q *operations.QuerySpec) { q.Columns = []string{"id", "id"} }, "duplicate result column"},
		{"filter on unknown column", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "nope", Op: operations.OpEq, Param: "p"}}
		}, "unknown column"},
		{"filter on json", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "meta", Op: operations.OpEq, Param: "p"}}
		}, "cannot be filtered"},
		{"filter on bytes", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "blob", Op: operations.OpEq, Param: "p"}}
		}, "cannot be filtered"},
		{"unknown op", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "id", Op: "like", Param: "p"}}
		}, "unknown filter op"},
		{"filter without a parameter", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "id", Op: operations.OpEq}}
		}, "names no parameter"},
		{"one parameter for two types", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "id", Op: operations.OpEq, Param: "p"}, {Column: "estimate", Op: operations.OpGt, Param: "p"}}
		}, "types"},
		{"order by unknown column", func(q *operations.QuerySpec) { q.OrderBy = []operations.Order{{Column: "nope"}} }, "order by unknown"},
		{"order by json", func(q *operations.QuerySpec) { q.OrderBy = []operations.Order{{Column: "meta"}} }, "cannot be ordered"},
		{"negative limit", func(q *operations.QuerySpec) { q.Limit = -1 }, "negative"},
		{"names without columns", func(q *operations.QuerySpec) { q.Names = []string{"x"} }, "result names"},
		{"fewer names than columns", func(q *operations.QuerySpec) { q.Columns, q.Names = []string{"id", "done"}, []string{"x"} }, "result names"},
		{"empty name", func(q *operations.QuerySpec) { q.Columns, q.Names = []string{"id"}, []string{""} }, "empty or repeated"},
		{"repeated name", func(q *operations.QuerySpec) { q.Columns, q.Names = []string{"id", "done"}, []string{"x", "x"} }, "empty or repeated"},
		{"a parameter and a literal", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "id", Op: operations.OpEq, Param: "p", Literal: "x"}}
		}, "a parameter and a literal"},
		{"string literal on an integer column", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "estimate", Op: operations.OpEq, Literal: "5"}}
		}, "does not fit column type integer"},
		{"2 on a boolean column", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "done", Op: operations.OpEq, Literal: int64(2)}}
		}, "does not fit column type boolean"},
		{"fractional literal on an integer column", func(q *operations.QuerySpec) {
			q.Filters = []operations.Filter{{Column: "estimate", Op: operations.OpEq, Literal: 1.5}}
		}, "does not fit column type integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := base
			tt.edit(&q)
			_, err := operations.Compile(sc, q)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := operations.Compile(sc, base); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
}

func TestBindTypesParametersByTheirColumn(t *testing.T) {
	sc := querySchema(t)
	p, err := operations.Compile(sc, operations.QuerySpec{ID: "q", Table: "tasks", MaxRows: 10, Filters: []operations.Filter{
		{Column: "project_id", Op: operations.OpEq, Param: "project"},
		{Column: "estimate", Op: operations.OpGte, Param: "min"},
		{Column: "score", Op: operations.OpLt, Param: "below"},
		{Column: "done", Op: operations.OpEq, Param: "done"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Params(); !reflect.DeepEqual(got, []string{"below", "done", "min", "project"}) {
		t.Fatalf("Params = %v", got)
	}
	params := func(fields ...operations.Field) operations.Value { return must(operations.Object(fields...)) }
	f := func(k string, v operations.Value) operations.Field { return operations.Field{Key: k, Value: v} }
	good := []operations.Field{f("project", str("p1")), f("min", operations.Integer(3)), f("below", must(operations.Number(2.5))), f("done", operations.Bool(false))}
	got, err := p.Bind(params(good...))
	if err != nil {
		t.Fatal(err)
	}
	want := []operations.Condition{
		{Column: "project_id", Op: operations.OpEq, Value: "p1"},
		{Column: "estimate", Op: operations.OpGte, Value: int64(3)},
		{Column: "score", Op: operations.OpLt, Value: 2.5},
		{Column: "done", Op: operations.OpEq, Value: false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Bind = %#v, want %#v", got, want)
	}
	t.Run("a safe integral number binds an integer column, an integer binds a float column", func(t *testing.T) {
		got, err := p.Bind(params(f("project", str("p1")), f("min", must(operations.Number(4))), f("below", operations.Integer(2)), f("done", operations.Bool(true))))
		if err != nil {
			t.Fatal(err)
		}
		if got[1].Value != int64(4) || got[2].Value != 2.0 {
			t.Fatalf("got %#v", got)
		}
	})
	refusals := []struct {
		name   string
		params operations.Value
	}{
		{"null for a query with parameters", operations.Null()},
		{"not an object", str("p1")},
		{"missing parameter", params(good[:3]...)},
		{"unknown parameter", params(append(append([]operations.Field{}, good...), f("extra", str("x")))...)},
		{"string for an integer", params(f("project", str("p1")), f("min", str("3")), good[2], good[3])},
		{"fractional number for an integer", params(f("project", str("p1")), f("min", must(operations.Number(3.5))), good[2], good[3])},
		{"null value", params(f("project", operations.Null()), good[1], good[2], good[3])},
		{"number for a boolean", params(good[0], good[1], good[2], f("done", must(operations.Number(1))))},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.Bind(tt.params); syncerr.CodeOf(err) != syncerr.OperationInvalid {
				t.Fatalf("Bind = %v, want operation.invalid_request", err)
			}
		})
	}
	t.Run("a query without parameters takes null or an empty object", func(t *testing.T) {
		p, err := operations.Compile(sc, operations.QuerySpec{ID: "all", Table: "tasks", MaxRows: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []operations.Value{operations.Null(), params()} {
			if conds, err := p.Bind(v); err != nil || len(conds) != 0 {
				t.Fatalf("Bind(%v) = %v, %v", v.Kind(), conds, err)
			}
		}
	})
}

func TestLiteralsNamesAndLimit(t *testing.T) {
	sc := querySchema(t)
	p, err := operations.Compile(sc, operations.QuerySpec{ID: "q", Table: "tasks", MaxRows: 10, Limit: 3,
		Columns: []string{"id", "project_id"}, Names: []string{"id", "projectId"},
		Filters: []operations.Filter{
			{Column: "done", Op: operations.OpEq, Literal: int64(0)},
			{Column: "score", Op: operations.OpGt, Literal: int64(2)},
			{Column: "estimate", Op: operations.OpLte, Literal: 7.0},
			{Column: "project_id", Op: operations.OpEq, Param: "project"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Params(); !reflect.DeepEqual(got, []string{"project"}) {
		t.Fatalf("Params = %v", got)
	}
	conds, err := p.Bind(must(operations.Object(operations.Field{Key: "project", Value: str("p1")})))
	if err != nil {
		t.Fatal(err)
	}
	want := []operations.Condition{
		{Column: "done", Op: operations.OpEq, Value: false},
		{Column: "score", Op: operations.OpGt, Value: 2.0},
		{Column: "estimate", Op: operations.OpLte, Value: int64(7)},
		{Column: "project_id", Op: operations.OpEq, Value: "p1"},
	}
	if !reflect.DeepEqual(conds, want) {
		t.Fatalf("Bind = %#v, want %#v", conds, want)
	}
	row, err := p.Row([]any{"t1", "p1", nil, 0.0, false, nil, nil})
	if err != nil {
		t.Fatal(err)
	}
	if row[0].Key != "id" || row[1].Key != "projectId" {
		t.Fatalf("result keys %q, %q", row[0].Key, row[1].Key)
	}
	limits := []struct {
		limit, maxRows, fetch int
	}{
		{0, 10, 11},  // no limit: one past the cap
		{3, 10, 3},   // the limit keeps the answer within the cap
		{10, 10, 10}, // a limit at the cap
		{50, 10, 11}, // a limit past the cap: the cap decides
	}
	for _, tt := range limits {
		p, err := operations.Compile(sc, operations.QuerySpec{ID: "q", Table: "tasks", MaxRows: tt.maxRows, Limit: tt.limit})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.FetchLimit(); got != tt.fetch {
			t.Errorf("limit %d, maxRows %d: FetchLimit %d, want %d", tt.limit, tt.maxRows, got, tt.fetch)
		}
	}
}

func TestRowNormalizesToTheDeclaredTypes(t *testing.T) {
	sc := querySchema(t)
	p, err := operations.Compile(sc, operations.QuerySpec{ID: "q", Table: "tasks", MaxRows: 10,
		Columns: []string{"estimate", "id", "score", "done", "meta", "blob"}})
	if err != nil {
		t.Fatal(err)
	}
	row, err := p.Row([]any{"t1", "p1", int64(5), 1.25, true, `{"a":1}`, []byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := must(operations.Object(row...)).Encode()
	want := obj(`["estimate",{"t":"number","v":5}]`, `["id",{"t":"string","v":"t1"}]`, `["score",{"t":"number","v":1.25}]`,
		`["done",{"t":"boolean","v":true}]`, `["meta",{"t":"string","v":"{\"a\":1}"}]`, `["blob",{"t":"bytes","v":"AQ=="}]`)
	if string(enc) != want {
		t.Fatalf("got  %s\nwant %s", enc, want)
	}
	nulls, err := p.Row([]any{"t1", "p1", nil, 0.0, false, nil, nil})
	if err != nil {
		t.Fatal(err)
	}
	if nulls[0].Value.Kind() != operations.KindNull {
		t.Fatalf("nullable estimate: %v", nulls[0].Value.Kind())
	}
	failures := []struct {
		name  string
		cells []any
	}{
		{"null in a non-nullable column", []any{"t1", "p1", nil, nil, false, nil, nil}},
		{"integer past 2^53-1", []any{"t1", "p1", int64(1) << 53, 0.0, false, nil, nil}},
		{"wrong Go type", []any{"t1", "p1", "5", 0.0, false, nil, nil}},
		{"missing cells", []any{"t1"}},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.Row(tt.cells); syncerr.CodeOf(err) != syncerr.OperationQueryFailed {
				t.Fatalf("Row = %v, want operation.query_failed", err)
			}
		})
	}
}

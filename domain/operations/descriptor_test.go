package operations_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/operations"
)

// descriptor builds a descriptor over querySchema's tasks table. Each
// column is "key=column": the result key and the column it reads,
// declared with the schema's type and nullability; params are
// "name:type" or "name>langName:type".
func descriptor(t *testing.T, sql string, params []string, cols ...string) operations.Descriptor {
	t.Helper()
	tasks := querySchema(t).Table("tasks")
	d := operations.Descriptor{Name: "q", File: "q.sql", SQL: sql, Tables: []string{"tasks"}}
	for _, p := range params {
		name, typ, _ := strings.Cut(p, ":")
		name, lang, ok := strings.Cut(name, ">")
		if !ok {
			lang = name
		}
		d.Params = append(d.Params, operations.DescriptorParam{Name: name, LangName: lang, Type: typ})
	}
	for _, c := range cols {
		key, col, _ := strings.Cut(c, "=")
		sc := tasks.Columns[tasks.ColumnIndex(col)]
		d.Columns = append(d.Columns, operations.DescriptorColumn{Name: col, LangName: key, Type: sc.Type.String(),
			Nullable: sc.Nullable, Fidelity: "exact", Origin: &operations.DescriptorOrigin{Table: "tasks", Column: col}})
	}
	return d
}

func TestDescriptorSpecReadsTheSubset(t *testing.T) {
	sc := querySchema(t)
	every := []string{"id", "project_id", "estimate", "score", "done", "meta", "blob"}
	tests := []struct {
		name string
		d    operations.Descriptor
		want operations.QuerySpec
	}{
		{"plain columns, one parameter",
			descriptor(t, "SELECT id, done\nFROM tasks\nWHERE project_id = :projectId\nORDER BY id", []string{"projectId:string"}, "id=id", "done=done"),
			operations.QuerySpec{Columns: []string{"id", "done"}, Names: []string{"id", "done"},
				Filters: []operations.Filter{{Column: "project_id", Op: operations.OpEq, Param: "projectId"}},
				OrderBy: []operations.Order{{Column: "id"}}}},
		{"aliases, comments, qualifiers, a literal, a flipped comparison, a result name in ORDER BY, a limit",
			descriptor(t, "-- name: q\n/* the\nopen ones */ SELECT t.id, t.estimate AS est FROM tasks AS t\nWHERE t.project_id = :p AND t.done = 0 AND :min <= estimate\nORDER BY est DESC, t.id ASC\nLIMIT 20;",
				[]string{"p:string", "min:integer"}, "id=id", "est=estimate"),
			operations.QuerySpec{Columns: []string{"id", "estimate"}, Names: []string{"id", "est"}, Limit: 20,
				Filters: []operations.Filter{
					{Column: "project_id", Op: operations.OpEq, Param: "p"},
					{Column: "done", Op: operations.OpEq, Literal: int64(0)},
					{Column: "estimate", Op: operations.OpGte, Param: "min"}},
				OrderBy: []operations.Order{{Column: "estimate", Desc: true}, {Column: "id"}}}},
		{"every column, a negative float, a table alias without AS",
			descriptor(t, "select * from tasks x where x.score > -1.5 and x.score <> 2e3", nil, "id=id", "project_id=project_id",
				"estimate=estimate", "score=score", "done=done", "meta=meta", "blob=blob"),
			operations.QuerySpec{Columns: every, Names: every, Filters: []operations.Filter{
				{Column: "score", Op: operations.OpGt, Literal: -1.5},
				{Column: "score", Op: operations.OpNe, Literal: 2000.0}}}},
		{"a SYQL lowering: inert conditions, parentheses, TRUE, the table as qualifier",
			descriptor(t, "select id from tasks where tasks.project_id = :projectId and 1 and (done = true and (1))", []string{"projectId:string"}, "id=id"),
			operations.QuerySpec{Columns: []string{"id"}, Names: []string{"id"}, Filters: []operations.Filter{
				{Column: "project_id", Op: operations.OpEq, Param: "projectId"},
				{Column: "done", Op: operations.OpEq, Literal: true}}}},
		{"a quoted string, a parameter sent under its language name",
			descriptor(t, "SELECT id FROM tasks WHERE project_id = 'it''s' AND id != :row_id", []string{"row_id>rowId:string"}, "id=id"),
			operations.QuerySpec{Columns: []string{"id"}, Names: []string{"id"}, Filters: []operations.Filter{
				{Column: "project_id", Op: operations.OpEq, Literal: "it's"},
				{Column: "id", Op: operations.OpNe, Param: "rowId"}}}},
		{"a result name in a condition resolves to its column",
			descriptor(t, "SELECT id, project_id AS projectId FROM tasks WHERE projectId = :projectId", []string{"projectId:string"}, "id=id", "projectId=project_id"),
			operations.QuerySpec{Columns: []string{"id", "project_id"}, Names: []string{"id", "projectId"}, Filters: []operations.Filter{
				{Column: "project_id", Op: operations.OpEq, Param: "projectId"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.d.Spec(sc, "sha256:ab/q", 100)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.ID, tt.want.Table, tt.want.MaxRows = "sha256:ab/q", "tasks", 100
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
			if _, err := operations.Compile(sc, got); err != nil {
				t.Fatalf("Compile: %v", err)
			}
		})
	}
}

func TestDescriptorSpecRefuses(t *testing.T) {
	sc := querySchema(t)
	p := []string{"p:string"}
	edit := func(d operations.Descriptor, f func(*operations.Descriptor)) operations.Descriptor {
		f(&d)
		return d
	}
	base := func() operations.Descriptor {
		return descriptor(t, "SELECT id FROM tasks WHERE project_id = :p", p, "id=id")
	}
	tests := []struct {
		name string
		d    operations.Descriptor
		want string
	}{
		{"a join", descriptor(t, "SELECT t.id FROM tasks t JOIN other o ON o.id = t.id WHERE t.project_id = :p", p, "id=id"), "joins are not supported"},
		{"a comma join", descriptor(t, "SELECT id FROM tasks, other WHERE project_id = :p", p, "id=id"), "joins are not supported"},
		{"grouping", descriptor(t, "SELECT id FROM tasks WHERE project_id = :p GROUP BY id", p, "id=id"), "grouping are not supported"},
		{"OR", descriptor(t, "SELECT id FROM tasks WHERE project_id = :p OR done = 1", p, "id=id"), "OR are not supported"},
		{"IN", descriptor(t, "SELECT id FROM tasks WHERE project_id IN (:p)", p, "id=id"), "IN lists"},
		{"LIKE", descriptor(t, "SELECT id FROM tasks WHERE project_id LIKE :p", p, "id=id"), "LIKE"},
		{"IS NULL", descriptor(t, "SELECT id FROM tasks WHERE estimate IS NULL AND project_id = :p", p, "id=id"), "IS comparisons"},
		{"an aggregate", descriptor(t, "SELECT count(*) AS n FROM tasks WHERE project_id = :p", p), "function calls and aggregates"},
		{"a function in a condition", descriptor(t, "SELECT id FROM tasks WHERE lower(project_id) = :p", p, "id=id"), "function calls"},
		{"arithmetic", descriptor(t, "SELECT id FROM tasks WHERE estimate > :p + 0", []string{"p:integer"}, "id=id"), "expressions"},
		{"a parameter as LIMIT", descriptor(t, "SELECT id FROM tasks WHERE project_id = :p LIMIT :n", p, "id=id"), "after LIMIT"},
		{"OFFSET", descriptor(t, "SELECT id FROM tasks WHERE project_id = :p LIMIT 5 OFFSET 5", p, "id=id"), "OFFSET"},
		{"DISTINCT", descriptor(t, "SELECT DISTINCT id FROM tasks WHERE project_id = :p", p, "id=id"), "DISTINCT"},
		{"NULLS LAST", descriptor(t, "SELECT id FROM tasks WHERE project_id = :p ORDER BY estimate NULLS LAST", p, "id=id"), "NULLS"},
		{"two columns compared", descriptor(t, "SELECT id FROM tasks WHERE project_id = id", nil, "id=id"), "one side must be a column"},
		{"a quoted identifier", descriptor(t, `SELECT "id" FROM tasks`, nil, "id=id"), "quoted identifiers"},
		{"a positional parameter", descriptor(t, "SELECT id FROM tasks WHERE project_id = ?", nil, "id=id"), "positional parameters"},
		{"a qualifier of no table", descriptor(t, "SELECT x.id FROM tasks t", nil, "id=id"), "names no table"},
		{"an unterminated string", descriptor(t, "SELECT id FROM tasks WHERE project_id = 'p", nil, "id=id"), "unterminated string"},
		{"not a SELECT", descriptor(t, "DELETE FROM tasks", nil), "begin with SELECT"},
		{"an unknown table", edit(descriptor(t, "SELECT id FROM nope", nil, "id=id"), func(d *operations.Descriptor) { d.Tables = []string{"nope"} }), `unknown table "nope"`},
		{"tables the statement does not read", edit(base(), func(d *operations.Descriptor) { d.Tables = []string{"docs", "tasks"} }), "lists tables"},
		{"a SYQL query of several statements", edit(base(), func(d *operations.Descriptor) {
			d.SYQL = &operations.DescriptorSYQL{}
			d.SYQL.Plan.Statements = []json.RawMessage{[]byte("{}"), []byte("{}")}
		}), "lowers to 2 statements"},
		{"fewer declared columns", descriptor(t, "SELECT id, done FROM tasks WHERE project_id = :p", p, "id=id"), "declares 1"},
		{"another result key", descriptor(t, "SELECT id AS rowId FROM tasks WHERE project_id = :p", p, "id=id"), `is "rowId" in the statement, "id" in the descriptor`},
		{"a result column of another origin", edit(base(), func(d *operations.Descriptor) { d.Columns[0].Origin.Column = "project_id" }), "does not declare it as column tasks.id"},
		{"a computed result column", edit(base(), func(d *operations.Descriptor) { d.Columns[0].Origin, d.Columns[0].Fidelity = nil, "fallback" }), "does not declare it"},
		{"another type", edit(base(), func(d *operations.Descriptor) { d.Columns[0].Type = "integer" }), "generated against another schema"},
		{"another nullability", edit(base(), func(d *operations.Descriptor) { d.Columns[0].Nullable = true }), "generated against another schema"},
		{"an undeclared parameter", descriptor(t, "SELECT id FROM tasks WHERE project_id = :q", p, "id=id"), "parameter :q is not declared"},
		{"a parameter of another type", descriptor(t, "SELECT id FROM tasks WHERE project_id = :p", []string{"p:integer"}, "id=id"), "declared integer"},
		{"a parameter no condition uses", descriptor(t, "SELECT id FROM tasks WHERE project_id = :p", []string{"p:string", "extra:string"}, "id=id"), ":extra is not compared"},
		{"a condition on an unknown column", descriptor(t, "SELECT id FROM tasks WHERE nope = :p", p, "id=id"), `unknown column "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.d.Spec(sc, "sha256:ab/q", 100)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Spec = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseQueryIR(t *testing.T) {
	doc := `{"queryIrVersion": 3, "queries": [{"name": "a", "extra": 1}, {"name": "b"}], "later": true}` + "\n"
	ir, err := operations.ParseQueryIR([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(doc))
	if want := "sha256:" + hex.EncodeToString(sum[:]) + "/b"; ir.ID("b") != want {
		t.Fatalf("ID = %q, want %q", ir.ID("b"), want)
	}
	if _, ok := ir.Descriptor("b"); !ok {
		t.Fatal("no descriptor b")
	}
	if _, ok := ir.Descriptor("c"); ok {
		t.Fatal("descriptor c")
	}
	refusals := map[string]string{
		"another version": `{"queryIrVersion": 2, "queries": []}`,
		"no version":      `{"queries": []}`,
		"a repeated name": `{"queryIrVersion": 3, "queries": [{"name": "a"}, {"name": "a"}]}`,
		"an empty name":   `{"queryIrVersion": 3, "queries": [{"name": ""}]}`,
		"trailing data":   `{"queryIrVersion": 3, "queries": []} {}`,
		"not JSON":        `queryIrVersion: 3`,
	}
	for name, doc := range refusals {
		if _, err := operations.ParseQueryIR([]byte(doc)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

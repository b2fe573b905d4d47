package operations_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app/operations"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/ports"
)

func todosSchema(t *testing.T) *schema.Schema {
	t.Helper()
	s, err := schema.Load(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fixtureHash is the descriptor id prefix of testdata/todos.queries.ir.json.
func fixtureHash(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "todos.queries.ir.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestLoadQueryFileRegistersDescriptors(t *testing.T) {
	sc := todosSchema(t)
	qs, err := operations.LoadQueryFile(filepath.Join("testdata", "operations.json"), sc)
	if err != nil {
		t.Fatal(err)
	}
	h := fixtureHash(t)
	want := []operations.Query{
		{Spec: opdomain.QuerySpec{ID: "lists.recent", Table: "lists", Columns: []string{"id", "title"},
			Filters: []opdomain.Filter{{Column: "updated_at_ms", Op: opdomain.OpGte, Param: "since"}},
			OrderBy: []opdomain.Order{{Column: "updated_at_ms", Desc: true}}, MaxRows: 100}},
		{Name: "todosInList", Spec: opdomain.QuerySpec{ID: h + "/todosInList", Table: "todos", MaxRows: 500,
			Columns: []string{"id", "title", "done", "position"}, Names: []string{"id", "title", "done", "position"},
			Filters: []opdomain.Filter{{Column: "list_id", Op: opdomain.OpEq, Param: "listId"}},
			OrderBy: []opdomain.Order{{Column: "position"}}}},
		{Name: "openTodos", Spec: opdomain.QuerySpec{ID: h + "/openTodos", Table: "todos", MaxRows: 50, Limit: 50,
			Columns: []string{"id", "title", "updated_at_ms"}, Names: []string{"id", "title", "updatedAtMs"},
			Filters: []opdomain.Filter{{Column: "list_id", Op: opdomain.OpEq, Param: "listId"}, {Column: "done", Op: opdomain.OpEq, Literal: int64(0)}},
			OrderBy: []opdomain.Order{{Column: "updated_at_ms", Desc: true}}}},
		{Name: "listsByOwner", Spec: opdomain.QuerySpec{ID: h + "/listsByOwner", Table: "lists", MaxRows: 100,
			Columns: []string{"id", "title", "updated_at_ms"}, Names: []string{"id", "title", "updatedAtMs"},
			Filters: []opdomain.Filter{{Column: "owner_id", Op: opdomain.OpEq, Param: "ownerId"}},
			OrderBy: []opdomain.Order{{Column: "title"}}}},
	}
	if !reflect.DeepEqual(qs, want) {
		t.Fatalf("got  %+v\nwant %+v", qs, want)
	}
	reg, err := operations.NewRegistry(sc, qs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Descriptors(); !reflect.DeepEqual(got, []string{"listsByOwner=" + h + "/listsByOwner",
		"openTodos=" + h + "/openTodos", "todosInList=" + h + "/todosInList"}) {
		t.Fatalf("Descriptors = %v", got)
	}
	// Validators reach a descriptor by its name or its id.
	var queries ports.TxQueries = reg
	for _, id := range []string{"openTodos", h + "/openTodos"} {
		tx := &recordingTx{n: 1}
		if _, err := queries.QueryInTx(context.Background(), tx, id, map[string]any{"listId": "l-1"}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		wantQ := ports.AuthoritativeQuery{Table: "todos", Limit: 50,
			Where:   []opdomain.Condition{{Column: "list_id", Op: opdomain.OpEq, Value: "l-1"}, {Column: "done", Op: opdomain.OpEq, Value: false}},
			OrderBy: []opdomain.Order{{Column: "updated_at_ms", Desc: true}}}
		if !reflect.DeepEqual(tx.last, wantQ) {
			t.Fatalf("%s: query %+v, want %+v", id, tx.last, wantQ)
		}
		if table, ok := reg.QueryTable(id); !ok || table != "todos" {
			t.Fatalf("QueryTable(%s) = %q, %t", id, table, ok)
		}
	}
}

func TestLoadQueryFileRefusesDescriptors(t *testing.T) {
	sc := todosSchema(t)
	fixture, err := os.ReadFile(filepath.Join("testdata", "todos.queries.ir.json"))
	if err != nil {
		t.Fatal(err)
	}
	register := func(entries string) string {
		return `{"descriptors": {"file": "todos.queries.ir.json", "register": [` + entries + `]}}`
	}
	tests := []struct {
		name       string
		operations string
		document   string // "" writes the fixture
		want       []string
	}{
		{"a query outside the subset", register(`{"name": "listProgress", "maxRows": 10}`), "",
			[]string{"todos.queries.ir.json", `query "listProgress"`, "list-progress.sql", "aggregates are not supported"}},
		{"a name the document lacks", register(`{"name": "nope", "maxRows": 10}`), "",
			[]string{"todos.queries.ir.json", `query "nope"`, "no query of that name"}},
		{"maxRows 0", register(`{"name": "todosInList", "maxRows": 0}`), "",
			[]string{`query "todosInList"`, "maxRows 0"}},
		{"maxRows past 10,000", register(`{"name": "todosInList", "maxRows": 10001}`), "",
			[]string{`query "todosInList"`, "maxRows 10001"}},
		{"a query registered twice", register(`{"name": "todosInList", "maxRows": 1}, {"name": "todosInList", "maxRows": 2}`), "",
			[]string{`query "todosInList"`, "registered twice"}},
		{"nothing to register", register(``), "", []string{"no query to register"}},
		{"no file", `{"descriptors": {"register": [{"name": "todosInList", "maxRows": 1}]}}`, "", []string{`no "file"`}},
		{"a missing document", `{"descriptors": {"file": "gone.json", "register": [{"name": "todosInList", "maxRows": 1}]}}`, "",
			[]string{"gone.json"}},
		{"a document generated against another schema", register(`{"name": "todosInList", "maxRows": 10}`),
			strings.Replace(string(fixture), `"langName": "position",
          "type": "integer"`, `"langName": "position",
          "type": "float"`, 1),
			[]string{`query "todosInList"`, "todos-in-list.sql", `result column "position"`, "another schema"}},
		{"another document version", register(`{"name": "todosInList", "maxRows": 10}`),
			strings.Replace(string(fixture), `"queryIrVersion": 3`, `"queryIrVersion": 4`, 1),
			[]string{"todos.queries.ir.json", "queryIrVersion 4"}},
		{"an unknown registration field", register(`{"name": "todosInList", "maxRows": 10, "access": "privileged"}`), "",
			[]string{"operations.json", `unknown field "access"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			doc := tt.document
			if doc == "" {
				doc = string(fixture)
			}
			if err := os.WriteFile(filepath.Join(dir, "todos.queries.ir.json"), []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "operations.json")
			if err := os.WriteFile(path, []byte(tt.operations), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := operations.LoadQueryFile(path, sc)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestRegistryRefusesAClashingName(t *testing.T) {
	sc := todosSchema(t)
	q := func(id, name string) operations.Query {
		return operations.Query{Name: name, Spec: opdomain.QuerySpec{ID: id, Table: "todos", MaxRows: 1}}
	}
	clashes := map[string][]operations.Query{
		"a name twice":         {q("a", "n"), q("b", "n")},
		"a name that is an id": {q("a", "b"), q("b", "")},
	}
	for name, qs := range clashes {
		t.Run(name, func(t *testing.T) {
			if _, err := operations.NewRegistry(sc, qs, nil); err == nil {
				t.Fatal("registry built")
			}
		})
	}
}

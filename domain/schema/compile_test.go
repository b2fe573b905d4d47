package schema_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

const baseIR = `{
  "irVersion": 1,
  "schemaVersion": 2,
  "schemaVersions": [{"version": 2, "migrations": ["0002"]}, {"version": 1, "migrations": ["0001"]}],
  "tables": [
    {
      "name": "projects",
      "primaryKey": "id",
      "columns": [
        {"name": "id", "type": "string", "nullable": false},
        {"name": "org_id", "type": "string", "nullable": false}
      ],
      "scopes": ["org:{org_id}"]
    },
    {
      "name": "tasks",
      "primaryKey": "id",
      "columns": [
        {"name": "id", "type": "integer", "nullable": false},
        {"name": "project_id", "type": "string", "nullable": false},
        {"name": "owner", "type": "string", "nullable": true},
        {"name": "done", "type": "boolean", "nullable": false},
        {"name": "score", "type": "float", "nullable": true},
        {"name": "meta", "type": "json", "nullable": true},
        {"name": "secret", "type": "bytes", "nullable": true, "encrypted": true, "declaredType": "string"},
        {"name": "file", "type": "blob_ref", "nullable": true},
        {"name": "doc", "type": "crdt", "nullable": true, "crdtType": "yjs"}
      ],
      "scopes": [
        {"pattern": "project:{project_id}", "variable": "project_id", "column": "project_id"},
        {"pattern": "user:{uid}", "column": "owner"}
      ],
      "indexes": [{"name": "by_owner", "columns": ["owner", "done"]}],
      "references": [{"column": "project_id", "parentTable": "projects", "onDelete": "cascade"}],
      "materialize": false,
      "extensions": {"x": 1}
    }
  ],
  "subscriptions": [
    {"name": "mine", "table": "tasks", "scopes": [
      {"variable": "uid", "values": [{"kind": "parameter", "name": "userId"}, {"kind": "literal", "value": "u0"}]}
    ]}
  ],
  "extensions": {}
}`

func base(t *testing.T) *schema.IR {
	t.Helper()
	ir, err := schema.ParseIR([]byte(baseIR))
	if err != nil {
		t.Fatal(err)
	}
	return ir
}

func TestCompileBase(t *testing.T) {
	s, err := schema.Compile(base(t))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	if s.Version != 2 || !reflect.DeepEqual(s.Versions, []int32{1, 2}) {
		t.Fatalf("versions = %d %v", s.Version, s.Versions)
	}
	tasks := s.Table("tasks")
	if tasks == nil || s.TableIndex("tasks") != 1 || s.Table("nope") != nil {
		t.Fatal("table lookup")
	}
	if tasks.PrimaryKey != "id" || tasks.PKIndex != 0 || tasks.Materialize {
		t.Fatalf("pk/materialize: %+v", tasks)
	}
	if !s.Table("projects").Materialize {
		t.Fatal("materialize defaults to true")
	}
	if got := tasks.ColumnIndex("doc"); got != 8 {
		t.Fatalf("ColumnIndex(doc) = %d", got)
	}
	want := []schema.Scope{
		{Pattern: "project:{project_id}", Prefix: "project", Variable: "project_id", Column: "project_id"},
		{Pattern: "user:{uid}", Prefix: "user", Variable: "uid", Column: "owner"},
	}
	if !reflect.DeepEqual(tasks.Scopes, want) {
		t.Fatalf("scopes = %+v", tasks.Scopes)
	}
	if sc := s.Table("projects").Scopes[0]; sc.Column != "org_id" || sc.Key("o1") != "org:o1" {
		t.Fatalf("string scope form: %+v", sc)
	}
	if !tasks.HasEncryptedColumn() || tasks.Columns[6].DeclaredType != "string" || tasks.Columns[8].CRDTType != "yjs" {
		t.Fatal("column metadata lost")
	}
	if tasks.References[0].OnDelete != schema.OnDeleteCascade || tasks.Indexes[0].Name != "by_owner" {
		t.Fatal("indexes/references")
	}
	vars := s.ScopeVariables()
	if !vars["org_id"] || !vars["project_id"] || !vars["uid"] || len(vars) != 3 {
		t.Fatalf("ScopeVariables = %v", vars)
	}
	sub := s.Subscriptions[0]
	if sub.Scopes[0].Values[1] != (schema.SubscriptionValue{Kind: "literal", Value: "u0"}) {
		t.Fatalf("literal = %+v", sub.Scopes[0].Values[1])
	}
	wantLayout := schema.Layout{
		{Name: "id", Type: "integer"}, {Name: "project_id", Type: "string"},
		{Name: "owner", Type: "string", Nullable: true}, {Name: "done", Type: "boolean"},
		{Name: "score", Type: "float", Nullable: true}, {Name: "meta", Type: "json", Nullable: true},
		{Name: "secret", Type: "bytes", Nullable: true}, {Name: "file", Type: "blob_ref", Nullable: true},
		{Name: "doc", Type: "crdt", Nullable: true},
	}
	if got := s.Layouts()["tasks"]; !reflect.DeepEqual(got, wantLayout) {
		t.Fatalf("layout = %+v", got)
	}
}

func TestCompileRefusals(t *testing.T) {
	col := func(ir *schema.IR, table, name string) *schema.IRColumn {
		for i := range ir.Tables {
			if ir.Tables[i].Name == table {
				for j := range ir.Tables[i].Columns {
					if ir.Tables[i].Columns[j].Name == name {
						return &ir.Tables[i].Columns[j]
					}
				}
			}
		}
		t.Fatalf("no column %s.%s", table, name)
		return nil
	}
	tasks := func(ir *schema.IR) *schema.IRTable { return &ir.Tables[1] }
	yes := true

	tests := []struct {
		name   string
		mutate func(*schema.IR)
		reason schema.Reason
		table  string
		column string
	}{
		{"unsupported irVersion", func(ir *schema.IR) { ir.IRVersion = 2 }, schema.ReasonUnsupportedIRVersion, "", ""},
		{"schemaVersion 0", func(ir *schema.IR) { ir.SchemaVersion = 0 }, schema.ReasonInvalidSchemaVersion, "", ""},
		{"schemaVersion not declared", func(ir *schema.IR) { ir.SchemaVersion = 3 }, schema.ReasonUndeclaredVersion, "", ""},
		{"no schemaVersions", func(ir *schema.IR) { ir.SchemaVersions = nil }, schema.ReasonUndeclaredVersion, "", ""},
		{"duplicate version", func(ir *schema.IR) { ir.SchemaVersions[1].Version = 2 }, schema.ReasonDuplicateVersion, "", ""},
		{"version entry 0", func(ir *schema.IR) { ir.SchemaVersions[1].Version = 0 }, schema.ReasonInvalidSchemaVersion, "", ""},
		{"no tables", func(ir *schema.IR) { ir.Tables = nil; ir.Subscriptions = nil }, schema.ReasonNoTables, "", ""},
		{"empty table name", func(ir *schema.IR) { ir.Tables[0].Name = "" }, schema.ReasonInvalidName, "", ""},
		{"quote in table name", func(ir *schema.IR) { ir.Tables[0].Name = `a"b` }, schema.ReasonInvalidName, `a"b`, ""},
		{"duplicate table", func(ir *schema.IR) { ir.Tables[1].Name = "projects"; ir.Subscriptions = nil }, schema.ReasonDuplicateTable, "projects", ""},
		{"no columns", func(ir *schema.IR) { ir.Tables[0].Columns = nil }, schema.ReasonNoColumns, "projects", ""},
		{"duplicate column", func(ir *schema.IR) { col(ir, "tasks", "owner").Name = "done" }, schema.ReasonDuplicateColumn, "tasks", "done"},
		{"reserved column", func(ir *schema.IR) { col(ir, "tasks", "owner").Name = "_sync_row_id" }, schema.ReasonReservedName, "tasks", "_sync_row_id"},
		{"unknown column type", func(ir *schema.IR) { col(ir, "tasks", "meta").Type = "decimal" }, schema.ReasonUnknownColumnType, "tasks", "meta"},
		{"missing nullable", func(ir *schema.IR) { col(ir, "tasks", "meta").Nullable = nil }, schema.ReasonMissingNullable, "tasks", "meta"},
		{"crdt without crdtType", func(ir *schema.IR) { col(ir, "tasks", "doc").CRDTType = "" }, schema.ReasonMissingCRDTType, "tasks", "doc"},
		{"encrypted not bytes", func(ir *schema.IR) { col(ir, "tasks", "meta").Encrypted = true }, schema.ReasonEncryptedNotBytes, "tasks", "meta"},
		{"unknown declaredType", func(ir *schema.IR) { col(ir, "tasks", "secret").DeclaredType = "date" }, schema.ReasonUnknownDeclaredType, "tasks", "secret"},
		{"missing primary key", func(ir *schema.IR) { tasks(ir).PrimaryKey = "" }, schema.ReasonMissingPrimaryKey, "tasks", ""},
		{"primary key names no column", func(ir *schema.IR) { tasks(ir).PrimaryKey = "nope" }, schema.ReasonUnknownPrimaryKey, "tasks", "nope"},
		{"float primary key", func(ir *schema.IR) { tasks(ir).PrimaryKey = "score"; col(ir, "tasks", "score").Nullable = new(bool) }, schema.ReasonPrimaryKeyType, "tasks", "score"},
		{"bytes primary key", func(ir *schema.IR) { tasks(ir).PrimaryKey = "secret" }, schema.ReasonPrimaryKeyType, "tasks", "secret"},
		{"blob_ref primary key", func(ir *schema.IR) { tasks(ir).PrimaryKey = "file" }, schema.ReasonPrimaryKeyType, "tasks", "file"},
		{"crdt primary key", func(ir *schema.IR) { tasks(ir).PrimaryKey = "doc" }, schema.ReasonPrimaryKeyType, "tasks", "doc"},
		{"nullable primary key", func(ir *schema.IR) { col(ir, "tasks", "id").Nullable = &yes }, schema.ReasonPrimaryKeyNullable, "tasks", "id"},
		{"no scopes", func(ir *schema.IR) { tasks(ir).Scopes = nil }, schema.ReasonNoScopes, "tasks", ""},
		{"pattern without placeholder", func(ir *schema.IR) { tasks(ir).Scopes[0].Pattern = "project" }, schema.ReasonInvalidScopePattern, "tasks", ""},
		{"pattern without prefix", func(ir *schema.IR) { tasks(ir).Scopes[0].Pattern = ":{project_id}" }, schema.ReasonInvalidScopePattern, "tasks", ""},
		{"pattern with two placeholders", func(ir *schema.IR) { tasks(ir).Scopes[0].Pattern = "p:{a}:{b}" }, schema.ReasonInvalidScopePattern, "tasks", ""},
		{"pattern with trailing text", func(ir *schema.IR) { tasks(ir).Scopes[0].Pattern = "p:{a}x" }, schema.ReasonInvalidScopePattern, "tasks", ""},
		{"pattern empty variable", func(ir *schema.IR) { tasks(ir).Scopes[0].Pattern = "p:{}" }, schema.ReasonInvalidScopePattern, "tasks", ""},
		{"variable disagrees with pattern", func(ir *schema.IR) { tasks(ir).Scopes[0].Variable = "other" }, schema.ReasonScopeVariableMismatch, "tasks", ""},
		{"scope variable names no column", func(ir *schema.IR) { tasks(ir).Scopes[1].Column = "" }, schema.ReasonUnknownScopeColumn, "tasks", "uid"},
		{"scope column missing", func(ir *schema.IR) { tasks(ir).Scopes[0].Column = "nope" }, schema.ReasonUnknownScopeColumn, "tasks", "nope"},
		{"encrypted scope column", func(ir *schema.IR) { tasks(ir).Scopes[1].Column = "secret" }, schema.ReasonEncryptedScopeColumn, "tasks", "secret"},
		{"variable mapped to two columns", func(ir *schema.IR) {
			tasks(ir).Scopes = append(tasks(ir).Scopes, schema.IRScope{Pattern: "u2:{uid}", Column: "project_id"})
		}, schema.ReasonDuplicateScopeVar, "tasks", "project_id"},
		{"index unknown column", func(ir *schema.IR) { tasks(ir).Indexes[0].Columns[1] = "nope" }, schema.ReasonUnknownIndexColumn, "tasks", "nope"},
		{"index without columns", func(ir *schema.IR) { tasks(ir).Indexes[0].Columns = nil }, schema.ReasonInvalidIndex, "tasks", ""},
		{"duplicate index", func(ir *schema.IR) { tasks(ir).Indexes = append(tasks(ir).Indexes, tasks(ir).Indexes[0]) }, schema.ReasonDuplicateIndex, "tasks", ""},
		{"reference unknown column", func(ir *schema.IR) { tasks(ir).References[0].Column = "nope" }, schema.ReasonUnknownRefColumn, "tasks", "nope"},
		{"reference unknown table", func(ir *schema.IR) { tasks(ir).References[0].ParentTable = "nope" }, schema.ReasonUnknownRefTable, "tasks", "project_id"},
		{"reference bad onDelete", func(ir *schema.IR) { tasks(ir).References[0].OnDelete = "explode" }, schema.ReasonInvalidOnDelete, "tasks", "project_id"},
		{"set_null on non-nullable", func(ir *schema.IR) { tasks(ir).References[0].OnDelete = "set_null" }, schema.ReasonSetNullNotNullable, "tasks", "project_id"},
		{"subscription unknown table", func(ir *schema.IR) { ir.Subscriptions[0].Table = "nope" }, schema.ReasonUnknownSubTable, "nope", ""},
		{"subscription unknown variable", func(ir *schema.IR) { ir.Subscriptions[0].Scopes[0].Variable = "org_id" }, schema.ReasonUnknownSubVariable, "tasks", ""},
		{"subscription bad value kind", func(ir *schema.IR) { ir.Subscriptions[0].Scopes[0].Values[0].Kind = "env" }, schema.ReasonInvalidSubValue, "tasks", ""},
		{"subscription parameter without name", func(ir *schema.IR) { ir.Subscriptions[0].Scopes[0].Values[0].Name = "" }, schema.ReasonInvalidSubValue, "tasks", ""},
		{"duplicate subscription", func(ir *schema.IR) { ir.Subscriptions = append(ir.Subscriptions, ir.Subscriptions[0]) }, schema.ReasonDuplicateSubscription, "tasks", ""},
		{"subscription without name", func(ir *schema.IR) { ir.Subscriptions[0].Name = "" }, schema.ReasonInvalidSubscription, "tasks", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ir := base(t)
			tt.mutate(ir)
			s, err := schema.Compile(ir)
			if err == nil {
				t.Fatalf("Compile accepted the IR: %+v", s)
			}
			var ce *schema.CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *CompileError", err, err)
			}
			if ce.Reason != tt.reason || ce.Table != tt.table || ce.Column != tt.column {
				t.Fatalf("got %+v, want reason %s table %q column %q", ce, tt.reason, tt.table, tt.column)
			}
			if syncerr.CodeOf(err) != syncerr.SchemaInvalid {
				t.Fatalf("CodeOf = %q", syncerr.CodeOf(err))
			}
		})
	}
}

func TestCompileErrorCatalogForm(t *testing.T) {
	err := error(&schema.CompileError{Table: "t", Column: "c", Reason: schema.ReasonPrimaryKeyNullable})
	var se *syncerr.Error
	if !errors.As(err, &se) {
		t.Fatal("no *syncerr.Error")
	}
	var d map[string]string
	if e := json.Unmarshal(se.Details, &d); e != nil {
		t.Fatal(e)
	}
	if d["table"] != "t" || d["column"] != "c" || d["reason"] != "primary_key_nullable" {
		t.Fatalf("details = %v", d)
	}
	if want := `schema invalid: table "t" column "c": primary_key_nullable`; err.Error() != want {
		t.Fatalf("Error() = %q", err.Error())
	}
}

func TestParseIR(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		{"not json", `{`, true},
		{"wrong field type", `{"irVersion":"1"}`, true},
		{"scope number", `{"tables":[{"scopes":[1]}]}`, true},
		{"minimal", `{"irVersion":1}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := schema.ParseIR([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			var ce *schema.CompileError
			if err != nil && (!errors.As(err, &ce) || ce.Reason != schema.ReasonMalformedIR) {
				t.Fatalf("err = %#v", err)
			}
		})
	}
}

func TestParseScopePattern(t *testing.T) {
	tests := []struct {
		in, prefix, variable string
		ok                   bool
	}{
		{"list:{list_id}", "list", "list_id", true},
		{"org:team:{id}", "org:team", "id", true},
		{"list:list_id", "", "", false},
		{"{id}", "", "", false},
		{"a{b:{id}", "", "", false},
		{"a:{b:c}", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		p, v, ok := schema.ParseScopePattern(tt.in)
		if p != tt.prefix || v != tt.variable || ok != tt.ok {
			t.Errorf("ParseScopePattern(%q) = %q %q %v", tt.in, p, v, ok)
		}
	}
}

// The shared IR fixtures: the three real schemas under fixtures/ir and
// the tasks load fixture.
const sharedFixtures = 4

func TestLoadSharedFixtures(t *testing.T) {
	vectortest.Fixture(t, "fixtures/tasks.ir.json")
	dir := vectortest.SharedDir()
	files, _ := filepath.Glob(filepath.Join(dir, "fixtures", "ir", "*.ir.json"))
	files = append(files, filepath.Join(dir, "fixtures", "tasks.ir.json"))
	if len(files) < sharedFixtures {
		t.Fatalf("%d IR fixtures under %s/fixtures, want at least %d: an incomplete copy", len(files), dir, sharedFixtures)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := schema.LoadFile(f)
			if err != nil {
				t.Fatalf("LoadFile: %v", err)
			}
			if s.Version < 1 || len(s.Tables) == 0 {
				t.Fatalf("empty schema: %+v", s)
			}
			for _, tb := range s.Tables {
				if len(tb.Scopes) == 0 || tb.ColumnIndex(tb.PrimaryKey) != tb.PKIndex {
					t.Fatalf("table %s not compiled: %+v", tb.Name, tb)
				}
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	if _, err := schema.LoadFile(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(p, []byte(`{"irVersion":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.LoadFile(p); syncerr.CodeOf(err) != syncerr.SchemaInvalid {
		t.Fatalf("bad file: %v", err)
	}
}

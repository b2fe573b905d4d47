package schema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// windowIR is a version's IR: projects and tasks, tasks with the columns
// given (name:type[?] where ? marks nullable), scopes and references.
type windowIR struct {
	version    int32
	taskCols   string
	taskPK     string
	taskScopes []schema.IRScope
	taskRefs   []schema.IRReference
	noProjects bool // leave the projects table out
	extra      bool // declare a labels table
}

func (w windowIR) compile(t *testing.T) *schema.Schema {
	t.Helper()
	col := func(spec string) schema.IRColumn {
		name, typ, _ := strings.Cut(spec, ":")
		nullable := strings.HasSuffix(typ, "?")
		typ = strings.TrimSuffix(typ, "?")
		c := schema.IRColumn{Name: name, Type: typ, Nullable: &nullable}
		if typ == "crdt" {
			c.CRDTType = "yjs"
		}
		return c
	}
	ir := &schema.IR{IRVersion: 1, SchemaVersion: w.version, SchemaVersions: []schema.IRSchemaVersion{{Version: w.version}}}
	if !w.noProjects {
		ir.Tables = append(ir.Tables, schema.IRTable{Name: "projects", PrimaryKey: "id",
			Columns: []schema.IRColumn{col("id:string"), col("owner:string")}, Scopes: []schema.IRScope{{Pattern: "user:{owner}"}}})
	}
	tasks := schema.IRTable{Name: "tasks", PrimaryKey: w.taskPK, Scopes: w.taskScopes, References: w.taskRefs}
	if tasks.PrimaryKey == "" {
		tasks.PrimaryKey = "id"
	}
	if tasks.Scopes == nil {
		tasks.Scopes = []schema.IRScope{{Pattern: "project:{project_id}"}}
	}
	for _, spec := range strings.Split(w.taskCols, ",") {
		tasks.Columns = append(tasks.Columns, col(spec))
	}
	ir.Tables = append(ir.Tables, tasks)
	if w.extra {
		ir.Tables = append(ir.Tables, schema.IRTable{Name: "labels", PrimaryKey: "id",
			Columns: []schema.IRColumn{col("id:string"), col("project_id:string")}, Scopes: []schema.IRScope{{Pattern: "project:{project_id}"}}})
	}
	s, err := schema.Compile(ir)
	if err != nil {
		t.Fatalf("compile v%d: %v", w.version, err)
	}
	return s
}

const v1Tasks = "id:string,project_id:string,title:string,done:boolean"

var refProject = []schema.IRReference{{Column: "project_id", ParentTable: "projects", OnDelete: "cascade"}}

func TestNewWindowRules(t *testing.T) {
	cur := windowIR{version: 3, taskCols: v1Tasks + ",priority:integer?,doc:crdt?", taskRefs: refProject, extra: true}
	tests := []struct {
		name    string
		current *windowIR // default cur
		older   []windowIR
		reason  schema.Reason
		table   string
		column  string
	}{
		{name: "one older version with appended nullable columns and a new table",
			older: []windowIR{{version: 2, taskCols: v1Tasks, taskRefs: refProject}}},
		{name: "two older versions, strictly decreasing",
			older: []windowIR{{version: 2, taskCols: v1Tasks + ",priority:integer?", taskRefs: refProject}, {version: 1, taskCols: v1Tasks, taskRefs: refProject}}},
		{name: "an older version equal to the current",
			older: []windowIR{{version: 3, taskCols: v1Tasks, taskRefs: refProject}}, reason: schema.ReasonWindowOrder},
		{name: "versions not decreasing",
			older:  []windowIR{{version: 1, taskCols: v1Tasks, taskRefs: refProject}, {version: 2, taskCols: v1Tasks, taskRefs: refProject}},
			reason: schema.ReasonWindowOrder},
		{name: "a newer version after the current",
			older: []windowIR{{version: 4, taskCols: v1Tasks, taskRefs: refProject}}, reason: schema.ReasonWindowOrder},
		{name: "a table the current schema dropped",
			current: &windowIR{version: 3, taskCols: v1Tasks, noProjects: true},
			older:   []windowIR{{version: 2, taskCols: v1Tasks}}, reason: schema.ReasonWindowTableRemoved, table: "projects"},
		{name: "a column the current table dropped",
			older:  []windowIR{{version: 2, taskCols: v1Tasks + ",priority:integer?,doc:crdt?,extra:string?", taskRefs: refProject}},
			reason: schema.ReasonWindowColumnRemoved, table: "tasks", column: "extra"},
		{name: "a column renamed",
			older:  []windowIR{{version: 2, taskCols: "id:string,project_id:string,name:string,done:boolean", taskRefs: refProject}},
			reason: schema.ReasonWindowColumnChanged, table: "tasks", column: "name"},
		{name: "a column's codec changed",
			older:  []windowIR{{version: 2, taskCols: "id:string,project_id:string,title:string,done:integer", taskRefs: refProject}},
			reason: schema.ReasonWindowColumnChanged, table: "tasks", column: "done"},
		{name: "a column's nullability changed",
			older:  []windowIR{{version: 2, taskCols: "id:string,project_id:string,title:string?,done:boolean", taskRefs: refProject}},
			reason: schema.ReasonWindowColumnChanged, table: "tasks", column: "title"},
		{name: "a column inserted in the middle",
			older:  []windowIR{{version: 2, taskCols: "id:string,project_id:string,done:boolean", taskRefs: refProject}},
			reason: schema.ReasonWindowColumnChanged, table: "tasks", column: "done"},
		{name: "the primary key moved",
			older:  []windowIR{{version: 2, taskCols: v1Tasks, taskPK: "title", taskRefs: refProject}},
			reason: schema.ReasonWindowPrimaryKey, table: "tasks", column: "title"},
		{name: "a scope pattern changed",
			older:  []windowIR{{version: 2, taskCols: v1Tasks, taskScopes: []schema.IRScope{{Pattern: "proj:{project_id}"}}, taskRefs: refProject}},
			reason: schema.ReasonWindowScopes, table: "tasks", column: "project_id"},
		{name: "a reference changed on an existing column",
			older:  []windowIR{{version: 2, taskCols: v1Tasks, taskRefs: []schema.IRReference{{Column: "project_id", ParentTable: "projects", OnDelete: "restrict"}}}},
			reason: schema.ReasonWindowReferences, table: "tasks", column: "project_id"},
		{name: "a reference added on an existing column",
			older: []windowIR{{version: 2, taskCols: v1Tasks}}, reason: schema.ReasonWindowReferences, table: "tasks", column: "project_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var older []*schema.Schema
			for _, o := range tt.older {
				older = append(older, o.compile(t))
			}
			c := cur
			if tt.current != nil {
				c = *tt.current
			}
			w, err := schema.NewWindow(c.compile(t), older...)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if w.Len() != 1+len(tt.older) || w.Current().Version != 3 || w.Oldest() != tt.older[len(tt.older)-1].version {
					t.Fatalf("window %v oldest %d", w.Versions(), w.Oldest())
				}
				return
			}
			var we *schema.WindowError
			if !errors.As(err, &we) {
				t.Fatalf("want a *WindowError, got %v", err)
			}
			if we.Reason != tt.reason || we.Table != tt.table || we.Column != tt.column {
				t.Fatalf("got %s %q %q (%v), want %s %q %q", we.Reason, we.Table, we.Column, err, tt.reason, tt.table, tt.column)
			}
			if syncerr.CodeOf(err) != syncerr.SchemaInvalid {
				t.Fatalf("code %s", syncerr.CodeOf(err))
			}
			if tt.column != "" && !strings.Contains(err.Error(), `column "`+tt.column+`"`) {
				t.Fatalf("message does not name the column: %v", err)
			}
		})
	}
}

func TestNewWindowAppendedColumnMustBeNullable(t *testing.T) {
	cur := windowIR{version: 2, taskCols: v1Tasks + ",priority:integer", taskRefs: refProject}.compile(t)
	_, err := schema.NewWindow(cur, windowIR{version: 1, taskCols: v1Tasks, taskRefs: refProject}.compile(t))
	var we *schema.WindowError
	if !errors.As(err, &we) || we.Reason != schema.ReasonWindowAppendedNotNull || we.Table != "tasks" || we.Column != "priority" || we.Version != 1 {
		t.Fatalf("got %v", err)
	}
	if want := `version 1 against current version 2: table "tasks" column "priority"`; !strings.Contains(err.Error(), want) {
		t.Fatalf("message %q lacks %q", err, want)
	}
}

func TestWindowViews(t *testing.T) {
	cur := windowIR{version: 3, taskCols: v1Tasks + ",priority:integer?", taskRefs: refProject, extra: true}.compile(t)
	old := windowIR{version: 2, taskCols: v1Tasks, taskRefs: refProject}.compile(t)
	w, err := schema.NewWindow(cur, old)
	if err != nil {
		t.Fatal(err)
	}
	if w.View(1) != nil || w.View(4) != nil {
		t.Fatal("unserved versions have views")
	}
	cv, ov := w.View(3), w.View(2)
	if cv != w.CurrentView() || !cv.IsCurrent() || ov.IsCurrent() || ov.Version() != 2 || ov.Schema() != old || ov.Current() != cur {
		t.Fatal("views")
	}
	if ov.Table("labels") != nil || cv.Table("labels") == nil {
		t.Fatal("a table the version lacks has a projection")
	}
	p := ov.Table("tasks")
	if p.Identity() || p.Columns() != 4 || p.Table() != old.Table("tasks") || p.Current() != cur.Table("tasks") {
		t.Fatalf("projection %+v", p)
	}
	for c, want := range []int{0, 1, 2, 3, -1} {
		if got := p.VersionIndex(c); got != want {
			t.Fatalf("VersionIndex(%d) = %d, want %d", c, got, want)
		}
	}
	for i := range p.Columns() {
		if p.Table().Columns[i] != p.Current().Columns[p.CurrentIndex(i)] {
			t.Fatalf("column %d maps onto another column", i)
		}
	}
	if !ov.Table("projects").Identity() || !cv.Table("tasks").Identity() {
		t.Fatal("unchanged tables project as the identity")
	}
	var nilView *schema.View
	if !nilView.IsCurrent() {
		t.Fatal("a nil view stands for the current version")
	}
}

func TestSingleWindowAndFollow(t *testing.T) {
	s := windowIR{version: 2, taskCols: v1Tasks}.compile(t)
	w := schema.SingleWindow(s)
	if w.Len() != 1 || w.Oldest() != 2 || w.View(2) != w.CurrentView() || w.View(1) != nil {
		t.Fatal("single window")
	}
	var cur *schema.Schema
	f := schema.Follow(func() *schema.Schema { return cur })
	if f() != nil {
		t.Fatal("a window before the schema compiled")
	}
	cur = s
	a, b := f(), f()
	if a == nil || a != b || a.Current() != s {
		t.Fatal("Follow builds one window per schema")
	}
	cur = windowIR{version: 3, taskCols: v1Tasks}.compile(t)
	if c := f(); c == a || c.Current() != cur {
		t.Fatal("Follow does not follow a new schema")
	}
}

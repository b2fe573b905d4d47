package schema

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Window is the set of schema versions a server serves (SPEC §9): the
// current compiled schema first, then each older served version, newest
// first. Storage, fences, authorization and validators use the current
// schema; a request's schema version picks its View, whose projections
// give the rows that version's codec carries. Build it with NewWindow,
// which enforces §9's compatibility rules, or SingleWindow.
type Window struct {
	views []*View
}

// View is one served schema version as its clients see it: the version's
// own compiled schema and, per table it declares, the projection of the
// current table onto it.
type View struct {
	schema  *Schema
	current *Schema
	tables  map[string]*Projection
}

// Projection maps a table of a served version onto the current table.
// Under the window's rules the version's columns are the current table's
// leading columns, in the same order: column i of the version is column i
// of the current table, and the current table's later columns are the
// ones appended since (all nullable).
type Projection struct {
	table   *Table
	current *Table
}

// SingleWindow is the window of one version: s alone, every projection
// the identity.
func SingleWindow(s *Schema) *Window {
	return &Window{views: []*View{newView(s, s)}}
}

// NewWindow checks the served versions against the current schema (SPEC
// §9) and builds the window: current first, then older, newest first.
// Versions must decrease strictly; every table of an older version must
// exist in the current schema with the older's columns as its leading
// columns (same name, type, nullability, CRDT type, encryption and
// declared type), the same primary key, the same scope patterns and the
// same references on those columns; every column appended since must be
// nullable. A refusal is a *WindowError naming the first incompatible
// table and column.
func NewWindow(current *Schema, older ...*Schema) (*Window, error) {
	if current == nil {
		return nil, &WindowError{Reason: ReasonWindowEmpty, Detail: "no current schema"}
	}
	w := &Window{views: []*View{newView(current, current)}}
	prev := current.Version
	for _, o := range older {
		if o == nil {
			return nil, &WindowError{Current: current.Version, Reason: ReasonWindowEmpty, Detail: "an older schema is missing"}
		}
		if o.Version >= prev {
			return nil, &WindowError{Version: o.Version, Current: current.Version, Reason: ReasonWindowOrder,
				Detail: fmt.Sprintf("version %d follows version %d; the window lists the current version first, then strictly older ones", o.Version, prev)}
		}
		prev = o.Version
		if err := compatible(current, o); err != nil {
			return nil, err
		}
		w.views = append(w.views, newView(o, current))
	}
	return w, nil
}

func newView(s, current *Schema) *View {
	v := &View{schema: s, current: current, tables: make(map[string]*Projection, len(s.Tables))}
	for _, t := range s.Tables {
		v.tables[t.Name] = &Projection{table: t, current: current.Table(t.Name)}
	}
	return v
}

// Current returns the current schema.
func (w *Window) Current() *Schema { return w.views[0].schema }

// CurrentView returns the current version's view (identity projections).
func (w *Window) CurrentView() *View { return w.views[0] }

// Oldest returns the oldest served version: the floor's required version.
func (w *Window) Oldest() int32 { return w.views[len(w.views)-1].schema.Version }

// Len returns how many versions the window serves.
func (w *Window) Len() int { return len(w.views) }

// Versions returns the served versions, current first.
func (w *Window) Versions() []int32 {
	out := make([]int32, len(w.views))
	for i, v := range w.views {
		out[i] = v.schema.Version
	}
	return out
}

// View returns the view of a served version, or nil when the window does
// not serve it (the request then gets the schema floor).
func (w *Window) View(version int32) *View {
	for _, v := range w.views {
		if v.schema.Version == version {
			return v
		}
	}
	return nil
}

// Version returns the view's schema version.
func (v *View) Version() int32 { return v.schema.Version }

// Schema returns the version's own compiled schema (its tables, its
// columns: the shape its clients' codecs carry).
func (v *View) Schema() *Schema { return v.schema }

// Current returns the current schema.
func (v *View) Current() *Schema { return v.current }

// IsCurrent reports whether the view is the current version's: every
// projection is the identity and rows pass through untouched. A nil view
// stands for the current version.
func (v *View) IsCurrent() bool { return v == nil || v.schema == v.current }

// Table returns the projection of the named table, or nil when the
// version does not declare it (its clients receive nothing of it).
func (v *View) Table(name string) *Projection { return v.tables[name] }

// Table returns the version's table.
func (p *Projection) Table() *Table { return p.table }

// Current returns the current table.
func (p *Projection) Current() *Table { return p.current }

// Columns returns how many columns the version's table has: the current
// table's leading columns it keeps.
func (p *Projection) Columns() int { return len(p.table.Columns) }

// Identity reports whether the version's table is the current one.
func (p *Projection) Identity() bool { return len(p.table.Columns) == len(p.current.Columns) }

// CurrentIndex returns the current table's position of the version's
// column i.
func (p *Projection) CurrentIndex(i int) int { return i }

// VersionIndex returns the version's position of the current table's
// column c, or -1 for a column appended since.
func (p *Projection) VersionIndex(c int) int {
	if c < len(p.table.Columns) {
		return c
	}
	return -1
}

// Window refusal reasons (SPEC §9).
const (
	ReasonWindowEmpty           Reason = "window_schema_missing"
	ReasonWindowOrder           Reason = "window_versions_not_decreasing"
	ReasonWindowTableRemoved    Reason = "window_table_removed"
	ReasonWindowColumnRemoved   Reason = "window_column_removed"
	ReasonWindowColumnChanged   Reason = "window_column_changed"
	ReasonWindowPrimaryKey      Reason = "window_primary_key_changed"
	ReasonWindowAppendedNotNull Reason = "window_appended_column_not_nullable"
	ReasonWindowScopes          Reason = "window_scopes_changed"
	ReasonWindowReferences      Reason = "window_references_changed"
)

// WindowError is a schema window refused at start (SPEC §9). Version is
// the older version found incompatible with Current; Table and Column
// locate the first incompatibility (Column as the older version names
// it, or the appended column).
//
// It unwraps to a *syncerr.Error with code sync.schema.invalid whose
// details carry version, table, column and reason.
type WindowError struct {
	Version, Current int32
	Table, Column    string
	Reason           Reason
	Detail           string
}

func (e *WindowError) Error() string {
	var b strings.Builder
	b.WriteString("schema window invalid")
	if e.Version != 0 {
		fmt.Fprintf(&b, ": version %d against current version %d", e.Version, e.Current)
	}
	where(&b, e.Table, e.Column, e.Reason, e.Detail)
	return b.String()
}

// Unwrap returns the catalog form of the refusal.
func (e *WindowError) Unwrap() error {
	var d map[string]string
	if e.Version != 0 {
		d = map[string]string{"version": strconv.Itoa(int(e.Version))}
	}
	return refusal(d, e.Table, e.Column, e.Reason)
}

// compatible applies §9's rules to one older version, table by table in
// its declaration order, column by column.
func compatible(cur, old *Schema) error {
	fail := func(t, c string, r Reason, detail string) error {
		return &WindowError{Version: old.Version, Current: cur.Version, Table: t, Column: c, Reason: r, Detail: detail}
	}
	for _, ot := range old.Tables {
		ct := cur.Table(ot.Name)
		if ct == nil {
			return fail(ot.Name, "", ReasonWindowTableRemoved, "the current schema no longer declares the table")
		}
		for i, oc := range ot.Columns {
			if i >= len(ct.Columns) {
				return fail(ot.Name, oc.Name, ReasonWindowColumnRemoved, "the current table has fewer columns")
			}
			if d := columnChange(oc, ct.Columns[i]); d != "" {
				return fail(ot.Name, oc.Name, ReasonWindowColumnChanged, d)
			}
		}
		if ot.PrimaryKey != ct.PrimaryKey {
			return fail(ot.Name, ot.PrimaryKey, ReasonWindowPrimaryKey,
				fmt.Sprintf("primary key %q, the current table's is %q", ot.PrimaryKey, ct.PrimaryKey))
		}
		for _, c := range ct.Columns[len(ot.Columns):] {
			if !c.Nullable {
				return fail(ot.Name, c.Name, ReasonWindowAppendedNotNull,
					"a column appended while older versions are served must be nullable (their pushes cannot write it)")
			}
		}
		if !slices.Equal(ot.Scopes, ct.Scopes) {
			return fail(ot.Name, scopeDiff(ot.Scopes, ct.Scopes), ReasonWindowScopes,
				fmt.Sprintf("scope patterns %s, the current table's are %s", patterns(ot.Scopes), patterns(ct.Scopes)))
		}
		if c, d := referenceChange(ot, ct); d != "" {
			return fail(ot.Name, c, ReasonWindowReferences, d)
		}
	}
	return nil
}

// columnChange describes how a column differs from its older form, or "".
func columnChange(o, c Column) string {
	switch {
	case o.Name != c.Name:
		return fmt.Sprintf("the current table has %q at this position", c.Name)
	case o.Type != c.Type:
		return fmt.Sprintf("type %s, now %s", o.Type, c.Type)
	case o.Nullable != c.Nullable:
		return fmt.Sprintf("nullable %t, now %t", o.Nullable, c.Nullable)
	case o.CRDTType != c.CRDTType:
		return fmt.Sprintf("crdtType %q, now %q", o.CRDTType, c.CRDTType)
	case o.Encrypted != c.Encrypted:
		return fmt.Sprintf("encrypted %t, now %t", o.Encrypted, c.Encrypted)
	case o.DeclaredType != c.DeclaredType:
		return fmt.Sprintf("declaredType %q, now %q", o.DeclaredType, c.DeclaredType)
	}
	return ""
}

// scopeDiff names the column of the first scope pattern that differs.
func scopeDiff(o, c []Scope) string {
	for i := range max(len(o), len(c)) {
		switch {
		case i >= len(o):
			return c[i].Column
		case i >= len(c) || o[i] != c[i]:
			return o[i].Column
		}
	}
	return ""
}

func patterns(s []Scope) string {
	out := make([]string, len(s))
	for i, sc := range s {
		out[i] = quote(sc.Pattern) + " on " + quote(sc.Column)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// referenceChange compares the references declared on the older table's
// columns: the same set in both (the current table may add references
// only on appended columns). It returns the first column whose
// references differ, in column order.
func referenceChange(o, c *Table) (string, string) {
	on := func(t *Table, col string) []Reference {
		var out []Reference
		for _, r := range t.References {
			if r.Column == col {
				out = append(out, r)
			}
		}
		slices.SortFunc(out, func(a, b Reference) int {
			return strings.Compare(a.ParentTable+"\x00"+string(a.OnDelete), b.ParentTable+"\x00"+string(b.OnDelete))
		})
		return out
	}
	for _, col := range o.Columns {
		or, cr := on(o, col.Name), on(c, col.Name)
		if !slices.Equal(or, cr) {
			return col.Name, fmt.Sprintf("references %s, the current table's are %s", refs(or), refs(cr))
		}
	}
	return "", ""
}

func refs(rs []Reference) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = quote(r.ParentTable) + " on delete " + string(r.OnDelete)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// Follow returns the window of whatever schema current returns now, a
// window of that one version, built once per schema: for services given
// no window of their own. It returns nil while current returns nil.
func Follow(current func() *Schema) func() *Window {
	var last atomic.Pointer[Window]
	return func() *Window {
		s := current()
		if s == nil {
			return nil
		}
		if w := last.Load(); w != nil && w.Current() == s {
			return w
		}
		w := SingleWindow(s)
		last.Store(w)
		return w
	}
}

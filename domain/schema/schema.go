// Package schema holds the compiled form of a Syncular schema IR: tables,
// columns in declaration order (the order every row codec is positional
// over), primary keys, scope patterns, indexes and references, and the
// per-table layouts that storage persists and compares at start.
package schema

// ColumnType is a column's codec type. The numeric values are the wire tags
// of SPEC §2.4 (the SSG2 column table carries them verbatim).
type ColumnType uint8

// Column type tags (SPEC §2.4).
const (
	TypeString  ColumnType = 1
	TypeInteger ColumnType = 2
	TypeFloat   ColumnType = 3
	TypeBoolean ColumnType = 4
	TypeJSON    ColumnType = 5
	TypeBytes   ColumnType = 6
	TypeBlobRef ColumnType = 7
	TypeCRDT    ColumnType = 8
)

var typeNames = [...]string{
	TypeString:  "string",
	TypeInteger: "integer",
	TypeFloat:   "float",
	TypeBoolean: "boolean",
	TypeJSON:    "json",
	TypeBytes:   "bytes",
	TypeBlobRef: "blob_ref",
	TypeCRDT:    "crdt",
}

// String returns the IR and rendering name of the type ("string", "blob_ref", ...).
func (t ColumnType) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return "unknown"
}

// Valid reports whether t is one of the eight registered tags.
func (t ColumnType) Valid() bool { return t >= TypeString && t <= TypeCRDT }

// ParseColumnType maps an IR type name to its tag.
func ParseColumnType(name string) (ColumnType, bool) {
	for i, n := range typeNames {
		if n != "" && n == name {
			return ColumnType(i), true
		}
	}
	return 0, false
}

// PrimaryKeyEligible reports whether a column of this type may be a primary
// key: its string rendering must be total and byte-stable (SPEC §2.4).
func (t ColumnType) PrimaryKeyEligible() bool {
	switch t {
	case TypeString, TypeInteger, TypeBoolean, TypeJSON:
		return true
	}
	return false
}

// Column is one column of a table, in declaration order.
type Column struct {
	Name     string
	Type     ColumnType
	Nullable bool
	// CRDTType names the merger of a crdt column (IR metadata, never on the wire).
	CRDTType string
	// Encrypted marks a client-side encrypted column; its Type is bytes and
	// DeclaredType keeps the app-facing type (IR metadata, never on the wire).
	Encrypted    bool
	DeclaredType string
}

// Scope is one scope pattern of a table: "prefix:{variable}" read from Column.
type Scope struct {
	Pattern  string
	Prefix   string // the literal before ":{"; the scope key is Prefix + ":" + value
	Variable string
	Column   string
}

// Key renders the inverted-index scope key for a stored value.
func (s Scope) Key(value string) string { return s.Prefix + ":" + value }

// Index is a declared secondary index over app columns.
type Index struct {
	Name    string
	Columns []string
	Unique  bool
}

// OnDelete is a declared reference's delete rule (SPEC §6.11).
type OnDelete string

// Reference delete rules.
const (
	OnDeleteRestrict OnDelete = "restrict"
	OnDeleteCascade  OnDelete = "cascade"
	OnDeleteSetNull  OnDelete = "set_null"
)

// Reference is a declared parent reference of a column (SPEC §6.11).
type Reference struct {
	Column      string
	ParentTable string
	OnDelete    OnDelete
}

// Table is a compiled synced table.
type Table struct {
	Name       string
	Columns    []Column
	PrimaryKey string
	PKIndex    int // position of the primary key in Columns
	Scopes     []Scope
	Indexes    []Index
	References []Reference
	// Materialize stores app columns as real database columns next to the
	// verbatim payload (default true).
	Materialize bool

	byName map[string]int
}

// ColumnIndex returns the declaration position of a column, or -1.
func (t *Table) ColumnIndex(name string) int {
	if i, ok := t.byName[name]; ok {
		return i
	}
	return -1
}

// HasEncryptedColumn reports whether any column is client-side encrypted
// (such tables never use the sqlite image lane, SPEC §5.11).
func (t *Table) HasEncryptedColumn() bool {
	for _, c := range t.Columns {
		if c.Encrypted {
			return true
		}
	}
	return false
}

// ScopeVariables returns the table's declared scope variables in declaration order.
func (t *Table) ScopeVariables() []string {
	out := make([]string, len(t.Scopes))
	for i, s := range t.Scopes {
		out[i] = s.Variable
	}
	return out
}

// ScopeFor returns the scope declaring variable, if any.
func (t *Table) ScopeFor(variable string) (Scope, bool) {
	for _, s := range t.Scopes {
		if s.Variable == variable {
			return s, true
		}
	}
	return Scope{}, false
}

// Layout returns the table's storage layout: name, type and nullability of
// every column in order. Storage persists it and compares it on open.
func (t *Table) Layout() Layout {
	l := make(Layout, len(t.Columns))
	for i, c := range t.Columns {
		l[i] = LayoutColumn{Name: c.Name, Type: c.Type.String(), Nullable: c.Nullable}
	}
	return l
}

// LayoutColumn is one entry of a stored table layout.
type LayoutColumn struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// Layout is a table's ordered column layout.
type Layout []LayoutColumn

// Schema is a compiled schema IR at one schema version.
type Schema struct {
	Version int32
	// Versions lists every schema version the IR declares (ascending).
	Versions []int32
	// Tables in bootstrap order (IR order: parents before children).
	Tables        []*Table
	Subscriptions []Subscription

	byName map[string]*Table
}

// Table returns the named table, or nil.
func (s *Schema) Table(name string) *Table { return s.byName[name] }

// TableIndex returns the position of a table in Tables, or -1.
func (s *Schema) TableIndex(name string) int {
	for i, t := range s.Tables {
		if t.Name == name {
			return i
		}
	}
	return -1
}

// ScopeVariables returns the union of scope variables declared by any table.
func (s *Schema) ScopeVariables() map[string]bool {
	out := map[string]bool{}
	for _, t := range s.Tables {
		for _, sc := range t.Scopes {
			out[sc.Variable] = true
		}
	}
	return out
}

// Layouts returns every table's layout keyed by table name.
func (s *Schema) Layouts() map[string]Layout {
	out := make(map[string]Layout, len(s.Tables))
	for _, t := range s.Tables {
		out[t.Name] = t.Layout()
	}
	return out
}

// Subscription is a named subscription template of the IR (client-side
// metadata; the server only checks it names a known table and variables).
type Subscription struct {
	Name   string
	Table  string
	Scopes []SubscriptionScope
}

// SubscriptionScope is one scope variable of a subscription template.
type SubscriptionScope struct {
	Variable string
	Values   []SubscriptionValue
}

// SubscriptionValue is a parameter reference or literal value.
type SubscriptionValue struct {
	Kind  string // "parameter" or "literal"
	Name  string
	Value string
}

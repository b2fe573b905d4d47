package schema

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ReservedColumnPrefix starts the names of storage-internal columns; app
// columns may not use it.
const ReservedColumnPrefix = "_sync_"

// Compile validates an IR and builds the compiled schema. It refuses, with
// a *CompileError, everything SPEC §2.4 and §3.1 refuse: unknown column
// types, ineligible or nullable primary keys, duplicate names, tables
// without scopes, malformed scope patterns, scope variables naming no
// column, and the structural errors of the IR format itself.
func Compile(ir *IR) (*Schema, error) {
	if ir == nil {
		return nil, &CompileError{Reason: ReasonMalformedIR, Detail: "no IR document"}
	}
	if ir.IRVersion != SupportedIRVersion {
		return nil, &CompileError{Reason: ReasonUnsupportedIRVersion,
			Detail: fmt.Sprintf("irVersion %d, this server reads %d", ir.IRVersion, SupportedIRVersion)}
	}
	versions, err := compileVersions(ir)
	if err != nil {
		return nil, err
	}
	if len(ir.Tables) == 0 {
		return nil, &CompileError{Reason: ReasonNoTables, Detail: "the IR declares no tables"}
	}
	s := &Schema{
		Version:  ir.SchemaVersion,
		Versions: versions,
		Tables:   make([]*Table, 0, len(ir.Tables)),
		byName:   make(map[string]*Table, len(ir.Tables)),
	}
	for i := range ir.Tables {
		t, err := compileTable(&ir.Tables[i])
		if err != nil {
			return nil, err
		}
		if _, dup := s.byName[t.Name]; dup {
			return nil, &CompileError{Table: t.Name, Reason: ReasonDuplicateTable}
		}
		s.byName[t.Name] = t
		s.Tables = append(s.Tables, t)
	}
	// References need every table name.
	for i, t := range s.Tables {
		refs, err := compileReferences(s, t, ir.Tables[i].References)
		if err != nil {
			return nil, err
		}
		t.References = refs
	}
	subs, err := compileSubscriptions(s, ir.Subscriptions)
	if err != nil {
		return nil, err
	}
	s.Subscriptions = subs
	return s, nil
}

func compileVersions(ir *IR) ([]int32, error) {
	if ir.SchemaVersion < 1 {
		return nil, &CompileError{Reason: ReasonInvalidSchemaVersion,
			Detail: fmt.Sprintf("schemaVersion %d is below 1", ir.SchemaVersion)}
	}
	seen := map[int32]bool{}
	out := make([]int32, 0, len(ir.SchemaVersions))
	for _, v := range ir.SchemaVersions {
		if v.Version < 1 {
			return nil, &CompileError{Reason: ReasonInvalidSchemaVersion,
				Detail: fmt.Sprintf("schemaVersions entry %d is below 1", v.Version)}
		}
		if seen[v.Version] {
			return nil, &CompileError{Reason: ReasonDuplicateVersion,
				Detail: fmt.Sprintf("schema version %d is declared twice", v.Version)}
		}
		seen[v.Version] = true
		out = append(out, v.Version)
	}
	if !seen[ir.SchemaVersion] {
		return nil, &CompileError{Reason: ReasonUndeclaredVersion,
			Detail: fmt.Sprintf("schemaVersion %d is missing from schemaVersions", ir.SchemaVersion)}
	}
	slices.Sort(out)
	return out, nil
}

func compileTable(it *IRTable) (*Table, error) {
	if err := checkName(it.Name, "", ""); err != nil {
		return nil, err
	}
	t := &Table{
		Name:        it.Name,
		Materialize: it.Materialize == nil || *it.Materialize,
		byName:      make(map[string]int, len(it.Columns)),
	}
	if len(it.Columns) == 0 {
		return nil, &CompileError{Table: t.Name, Reason: ReasonNoColumns}
	}
	for i, ic := range it.Columns {
		c, err := compileColumn(t.Name, ic)
		if err != nil {
			return nil, err
		}
		if _, dup := t.byName[c.Name]; dup {
			return nil, &CompileError{Table: t.Name, Column: c.Name, Reason: ReasonDuplicateColumn}
		}
		t.byName[c.Name] = i
		t.Columns = append(t.Columns, c)
	}

	if it.PrimaryKey == "" {
		return nil, &CompileError{Table: t.Name, Reason: ReasonMissingPrimaryKey}
	}
	pk := t.ColumnIndex(it.PrimaryKey)
	if pk < 0 {
		return nil, &CompileError{Table: t.Name, Column: it.PrimaryKey, Reason: ReasonUnknownPrimaryKey}
	}
	pkc := t.Columns[pk]
	if !pkc.Type.PrimaryKeyEligible() {
		return nil, &CompileError{Table: t.Name, Column: pkc.Name, Reason: ReasonPrimaryKeyType,
			Detail: fmt.Sprintf("type %s has no stable string form (string, integer, boolean and json qualify)", pkc.Type)}
	}
	if pkc.Nullable {
		return nil, &CompileError{Table: t.Name, Column: pkc.Name, Reason: ReasonPrimaryKeyNullable}
	}
	t.PrimaryKey, t.PKIndex = pkc.Name, pk

	scopes, err := compileScopes(t, it.Scopes)
	if err != nil {
		return nil, err
	}
	t.Scopes = scopes

	idx, err := compileIndexes(t, it.Indexes)
	if err != nil {
		return nil, err
	}
	t.Indexes = idx
	return t, nil
}

func compileColumn(table string, ic IRColumn) (Column, error) {
	if err := checkName(ic.Name, table, ic.Name); err != nil {
		return Column{}, err
	}
	if strings.HasPrefix(ic.Name, ReservedColumnPrefix) {
		return Column{}, &CompileError{Table: table, Column: ic.Name, Reason: ReasonReservedName,
			Detail: "the " + ReservedColumnPrefix + " prefix is reserved for storage columns"}
	}
	typ, ok := ParseColumnType(ic.Type)
	if !ok {
		return Column{}, &CompileError{Table: table, Column: ic.Name, Reason: ReasonUnknownColumnType,
			Detail: fmt.Sprintf("type %q", ic.Type)}
	}
	if ic.Nullable == nil {
		return Column{}, &CompileError{Table: table, Column: ic.Name, Reason: ReasonMissingNullable}
	}
	c := Column{Name: ic.Name, Type: typ, Nullable: *ic.Nullable, CRDTType: ic.CRDTType,
		Encrypted: ic.Encrypted, DeclaredType: ic.DeclaredType}
	if typ == TypeCRDT && c.CRDTType == "" {
		return Column{}, &CompileError{Table: table, Column: ic.Name, Reason: ReasonMissingCRDTType}
	}
	if c.Encrypted && typ != TypeBytes {
		return Column{}, &CompileError{Table: table, Column: ic.Name, Reason: ReasonEncryptedNotBytes,
			Detail: fmt.Sprintf("encrypted columns carry type bytes, got %s", typ)}
	}
	if c.DeclaredType != "" {
		if _, ok := ParseColumnType(c.DeclaredType); !ok {
			return Column{}, &CompileError{Table: table, Column: ic.Name, Reason: ReasonUnknownDeclaredType,
				Detail: fmt.Sprintf("declaredType %q", c.DeclaredType)}
		}
	}
	return c, nil
}

// ParseScopePattern splits "prefix:{variable}" into its prefix and
// variable. Exactly one placeholder, at the end, after a non-empty prefix
// and a colon.
func ParseScopePattern(p string) (prefix, variable string, ok bool) {
	open := strings.Index(p, ":{")
	if open <= 0 || !strings.HasSuffix(p, "}") {
		return "", "", false
	}
	prefix, variable = p[:open], p[open+2:len(p)-1]
	if variable == "" || strings.ContainsAny(prefix, "{}") || strings.ContainsAny(variable, "{}:") {
		return "", "", false
	}
	return prefix, variable, true
}

func compileScopes(t *Table, in []IRScope) ([]Scope, error) {
	if len(in) == 0 {
		return nil, &CompileError{Table: t.Name, Reason: ReasonNoScopes,
			Detail: "every synced table declares at least one scope pattern (SPEC §3.1)"}
	}
	out := make([]Scope, 0, len(in))
	seen := map[string]bool{}
	for _, is := range in {
		prefix, variable, ok := ParseScopePattern(is.Pattern)
		if !ok {
			return nil, &CompileError{Table: t.Name, Reason: ReasonInvalidScopePattern,
				Detail: fmt.Sprintf("pattern %q is not prefix:{variable}", is.Pattern)}
		}
		if is.Variable != "" && is.Variable != variable {
			return nil, &CompileError{Table: t.Name, Reason: ReasonScopeVariableMismatch,
				Detail: fmt.Sprintf("pattern %q declares variable %q, entry names %q", is.Pattern, variable, is.Variable)}
		}
		col := is.Column
		if col == "" {
			col = variable
		}
		ci := t.ColumnIndex(col)
		if ci < 0 {
			return nil, &CompileError{Table: t.Name, Column: col, Reason: ReasonUnknownScopeColumn,
				Detail: fmt.Sprintf("scope variable %q names no column", variable)}
		}
		if t.Columns[ci].Encrypted {
			return nil, &CompileError{Table: t.Name, Column: col, Reason: ReasonEncryptedScopeColumn,
				Detail: "the server cannot read an encrypted scope value"}
		}
		if seen[variable] {
			return nil, &CompileError{Table: t.Name, Column: col, Reason: ReasonDuplicateScopeVar,
				Detail: fmt.Sprintf("variable %q is declared twice", variable)}
		}
		seen[variable] = true
		out = append(out, Scope{Pattern: is.Pattern, Prefix: prefix, Variable: variable, Column: col})
	}
	return out, nil
}

func compileIndexes(t *Table, in []IRIndex) ([]Index, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]Index, 0, len(in))
	seen := map[string]bool{}
	for _, ix := range in {
		if ix.Name == "" || len(ix.Columns) == 0 {
			return nil, &CompileError{Table: t.Name, Reason: ReasonInvalidIndex,
				Detail: "an index needs a name and at least one column"}
		}
		if seen[ix.Name] {
			return nil, &CompileError{Table: t.Name, Reason: ReasonDuplicateIndex, Detail: fmt.Sprintf("index %q", ix.Name)}
		}
		seen[ix.Name] = true
		for _, c := range ix.Columns {
			if t.ColumnIndex(c) < 0 {
				return nil, &CompileError{Table: t.Name, Column: c, Reason: ReasonUnknownIndexColumn,
					Detail: fmt.Sprintf("index %q", ix.Name)}
			}
		}
		out = append(out, Index{Name: ix.Name, Columns: slices.Clone(ix.Columns), Unique: ix.Unique})
	}
	return out, nil
}

func compileReferences(s *Schema, t *Table, in []IRReference) ([]Reference, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]Reference, 0, len(in))
	for _, r := range in {
		ci := t.ColumnIndex(r.Column)
		if ci < 0 {
			return nil, &CompileError{Table: t.Name, Column: r.Column, Reason: ReasonUnknownRefColumn}
		}
		if s.Table(r.ParentTable) == nil {
			return nil, &CompileError{Table: t.Name, Column: r.Column, Reason: ReasonUnknownRefTable,
				Detail: fmt.Sprintf("parent table %q", r.ParentTable)}
		}
		od := OnDelete(r.OnDelete)
		switch od {
		case "":
			od = OnDeleteRestrict
		case OnDeleteRestrict, OnDeleteCascade:
		case OnDeleteSetNull:
			if !t.Columns[ci].Nullable {
				return nil, &CompileError{Table: t.Name, Column: r.Column, Reason: ReasonSetNullNotNullable}
			}
		default:
			return nil, &CompileError{Table: t.Name, Column: r.Column, Reason: ReasonInvalidOnDelete,
				Detail: fmt.Sprintf("onDelete %q", r.OnDelete)}
		}
		out = append(out, Reference{Column: r.Column, ParentTable: r.ParentTable, OnDelete: od})
	}
	return out, nil
}

func compileSubscriptions(s *Schema, in []IRSubscription) ([]Subscription, error) {
	out := make([]Subscription, 0, len(in))
	seen := map[string]bool{}
	for _, is := range in {
		if is.Name == "" {
			return nil, &CompileError{Table: is.Table, Reason: ReasonInvalidSubscription, Detail: "subscription without a name"}
		}
		if seen[is.Name] {
			return nil, &CompileError{Table: is.Table, Reason: ReasonDuplicateSubscription, Detail: fmt.Sprintf("subscription %q", is.Name)}
		}
		seen[is.Name] = true
		t := s.Table(is.Table)
		if t == nil {
			return nil, &CompileError{Table: is.Table, Reason: ReasonUnknownSubTable, Detail: fmt.Sprintf("subscription %q", is.Name)}
		}
		sub := Subscription{Name: is.Name, Table: is.Table}
		for _, sc := range is.Scopes {
			if _, ok := t.ScopeFor(sc.Variable); !ok {
				return nil, &CompileError{Table: t.Name, Reason: ReasonUnknownSubVariable,
					Detail: fmt.Sprintf("subscription %q names variable %q", is.Name, sc.Variable)}
			}
			ss := SubscriptionScope{Variable: sc.Variable}
			for _, v := range sc.Values {
				switch v.Kind {
				case "parameter":
					if v.Name == "" {
						return nil, &CompileError{Table: t.Name, Reason: ReasonInvalidSubValue,
							Detail: fmt.Sprintf("subscription %q: parameter without a name", is.Name)}
					}
					ss.Values = append(ss.Values, SubscriptionValue{Kind: v.Kind, Name: v.Name})
				case "literal":
					if len(v.Value) == 0 {
						return nil, &CompileError{Table: t.Name, Reason: ReasonInvalidSubValue,
							Detail: fmt.Sprintf("subscription %q: literal without a value", is.Name)}
					}
					ss.Values = append(ss.Values, SubscriptionValue{Kind: v.Kind, Value: literalString(v.Value)})
				default:
					return nil, &CompileError{Table: t.Name, Reason: ReasonInvalidSubValue,
						Detail: fmt.Sprintf("subscription %q: value kind %q", is.Name, v.Kind)}
				}
			}
			sub.Scopes = append(sub.Scopes, ss)
		}
		out = append(out, sub)
	}
	return out, nil
}

// checkName refuses empty names and names with control characters or
// quotes, which no storage could carry as an identifier.
func checkName(name, table, column string) error {
	bad := name == "" || strings.TrimSpace(name) != name
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '"' || r == '`' {
			bad = true
		}
	}
	if bad {
		if table == "" {
			table = name
		}
		return &CompileError{Table: table, Column: column, Reason: ReasonInvalidName,
			Detail: fmt.Sprintf("name %q", name)}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

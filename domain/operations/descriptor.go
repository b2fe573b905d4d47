package operations

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/syncd-dev/syncd/domain/schema"
)

// QueryIRVersion is the version of upstream typegen's analyzed-query
// document (output.queryIr, syncular.queries.ir.json) this reader knows.
const QueryIRVersion = 3

// QueryIR is typegen's analyzed-query document: every named query of a
// project, as the generated NamedQuery descriptors of each language are
// built from it. Only the fields a registration needs are read; fields
// added later are ignored, a different version is refused.
type QueryIR struct {
	Version int          `json:"queryIrVersion"`
	Queries []Descriptor `json:"queries"`
	// Hash is "sha256:" and the hex SHA-256 of the document's bytes: the
	// prefix of every generated descriptor id.
	Hash string `json:"-"`
}

// Descriptor is one analyzed named query.
type Descriptor struct {
	Name string `json:"name"`
	// File is the query's source file under the project's queries
	// directory, for messages.
	File string `json:"file"`
	// SQL is the lowered statement with named parameters (:name), the
	// statement the generated descriptor runs.
	SQL     string             `json:"sql"`
	Params  []DescriptorParam  `json:"params"`
	Columns []DescriptorColumn `json:"columns"`
	Tables  []string           `json:"tables"`
	SYQL    *DescriptorSYQL    `json:"syql,omitempty"`
}

// DescriptorParam is a parameter: its SQL name, the key callers send it
// under (langName) and its type.
type DescriptorParam struct {
	Name     string `json:"name"`
	LangName string `json:"langName"`
	Type     string `json:"type"`
}

// DescriptorColumn is a result column: its key in result rows
// (langName), its declared type and nullability, and the table column
// it reads when it is a plain column reference.
type DescriptorColumn struct {
	Name     string            `json:"name"`
	LangName string            `json:"langName"`
	Type     string            `json:"type"`
	Nullable bool              `json:"nullable"`
	Fidelity string            `json:"fidelity"`
	Origin   *DescriptorOrigin `json:"origin,omitempty"`
}

// DescriptorOrigin is the table column a result column reads.
type DescriptorOrigin struct {
	Table  string `json:"table"`
	Column string `json:"column"`
}

// DescriptorSYQL is the part of a SYQL query's plan a registration
// reads: its physical statements (one per activation state and sort
// profile).
type DescriptorSYQL struct {
	Plan struct {
		Statements []json.RawMessage `json:"statements"`
	} `json:"plan"`
}

// ParseQueryIR decodes an analyzed-query document and hashes its bytes.
func ParseQueryIR(data []byte) (QueryIR, error) {
	var doc QueryIR
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return QueryIR{}, err
	}
	if dec.More() {
		return QueryIR{}, errors.New("trailing data")
	}
	if doc.Version != QueryIRVersion {
		return QueryIR{}, fmt.Errorf("queryIrVersion %d, this build reads version %d", doc.Version, QueryIRVersion)
	}
	seen := map[string]bool{}
	for _, d := range doc.Queries {
		if d.Name == "" || seen[d.Name] {
			return QueryIR{}, fmt.Errorf("query name %q is empty or repeated", d.Name)
		}
		seen[d.Name] = true
	}
	sum := sha256.Sum256(data)
	doc.Hash = "sha256:" + hex.EncodeToString(sum[:])
	return doc, nil
}

// Descriptor returns the named query.
func (ir QueryIR) Descriptor(name string) (Descriptor, bool) {
	for _, d := range ir.Queries {
		if d.Name == name {
			return d, true
		}
	}
	return Descriptor{}, false
}

// ID is the operation id of the named query: the id its generated
// descriptor carries and a reference client sends, the document's hash
// and the name.
func (ir QueryIR) ID(name string) string { return ir.Hash + "/" + name }

// Spec states the descriptor as a QuerySpec against s, under id and with
// the registration's row cap. The statement must read one materialized
// table through the subset parseSelect takes, and the descriptor's
// metadata must agree with s: its table list, each result column's key,
// origin, type and nullability, and each parameter's type. A
// disagreement means the file was generated against another schema.
func (d Descriptor) Spec(s *schema.Schema, id string, maxRows int) (QuerySpec, error) {
	if d.SYQL != nil && len(d.SYQL.Plan.Statements) != 1 {
		return QuerySpec{}, fmt.Errorf("a SYQL query with optional inputs or sort profiles lowers to %d statements; a registered descriptor has one", len(d.SYQL.Plan.Statements))
	}
	st, err := parseSelect(d.SQL)
	if err != nil {
		return QuerySpec{}, err
	}
	t := s.Table(st.table)
	if t == nil {
		return QuerySpec{}, fmt.Errorf("unknown table %q", st.table)
	}
	if !slices.Equal(d.Tables, []string{t.Name}) {
		return QuerySpec{}, fmt.Errorf("the descriptor lists tables %q, its statement reads %q", d.Tables, t.Name)
	}
	if st.star {
		for _, c := range t.Columns {
			st.items = append(st.items, selectItem{column: c.Name, as: c.Name})
		}
	}
	spec := QuerySpec{ID: id, Table: t.Name, MaxRows: maxRows, Limit: st.limit}
	if len(st.items) != len(d.Columns) {
		return QuerySpec{}, fmt.Errorf("the statement has %d result columns, the descriptor declares %d", len(st.items), len(d.Columns))
	}
	for i, it := range st.items {
		if err := checkResultColumn(t, i, it, d.Columns[i]); err != nil {
			return QuerySpec{}, err
		}
		spec.Columns = append(spec.Columns, it.column)
		spec.Names = append(spec.Names, it.as)
	}
	// A column name resolves before a result name in conditions, and after
	// it in ORDER BY, as SQLite resolves them.
	byName := map[string]string{}
	for _, it := range st.items {
		byName[it.as] = it.column
	}
	column := func(name string, resultFirst bool) string {
		if c, ok := byName[name]; ok && (resultFirst || t.ColumnIndex(name) < 0) {
			return c
		}
		return name
	}
	params := map[string]DescriptorParam{}
	for _, p := range d.Params {
		params[p.Name] = p
	}
	used := map[string]bool{}
	for _, c := range st.where {
		col := column(c.column, false)
		i := t.ColumnIndex(col)
		if i < 0 {
			return QuerySpec{}, fmt.Errorf("condition on unknown column %q", c.column)
		}
		f := Filter{Column: col, Op: c.op, Literal: c.literal}
		if c.param != "" {
			p, ok := params[c.param]
			if !ok {
				return QuerySpec{}, fmt.Errorf("parameter :%s is not declared by the descriptor", c.param)
			}
			if p.Type != t.Columns[i].Type.String() {
				return QuerySpec{}, fmt.Errorf("parameter :%s is declared %s, column %q is %s", c.param, p.Type, col, t.Columns[i].Type)
			}
			f.Param = p.LangName
			if f.Param == "" {
				f.Param = p.Name
			}
			used[p.Name] = true
		}
		spec.Filters = append(spec.Filters, f)
	}
	for _, p := range d.Params {
		if !used[p.Name] {
			return QuerySpec{}, fmt.Errorf("parameter :%s is not compared with a column", p.Name)
		}
	}
	for _, o := range st.orderBy {
		spec.OrderBy = append(spec.OrderBy, Order{Column: column(o.name, true), Desc: o.desc})
	}
	return spec, nil
}

// checkResultColumn matches one selected column with its declaration.
func checkResultColumn(t *schema.Table, pos int, it selectItem, dc DescriptorColumn) error {
	i := t.ColumnIndex(it.column)
	if i < 0 {
		return fmt.Errorf("result column %q reads unknown column %q", it.as, it.column)
	}
	key := dc.LangName
	if key == "" {
		key = dc.Name
	}
	c := t.Columns[i]
	switch {
	case key != it.as:
		return fmt.Errorf("result column %d is %q in the statement, %q in the descriptor", pos+1, it.as, key)
	case c.Encrypted:
		return fmt.Errorf("result column %q reads encrypted column %q, which the server holds only as ciphertext", key, c.Name)
	case dc.Origin == nil || dc.Origin.Table != t.Name || dc.Origin.Column != c.Name:
		return fmt.Errorf("result column %q: the descriptor does not declare it as column %s.%s", key, t.Name, c.Name)
	case dc.Type != c.Type.String() || dc.Nullable != c.Nullable:
		return fmt.Errorf("result column %q: the descriptor declares %s (nullable %t), the schema has %s (nullable %t); was the file generated against another schema?",
			key, dc.Type, dc.Nullable, c.Type, c.Nullable)
	}
	return nil
}

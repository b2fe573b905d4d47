package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// fixture is the table the load runs on: its codec and the one scope
// variable that gives each virtual client its own slice of the data.
type fixture struct {
	schema   *schema.Schema
	table    *schema.Table
	codec    *rowcodec.Codec
	variable string // scope variable, e.g. project_id
	column   int    // the column the variable reads
}

func loadFixture(path, table string) (*fixture, error) {
	s, err := schema.LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--schema %s: %w", path, err)
	}
	t := s.Table(table)
	if t == nil {
		return nil, fmt.Errorf("--table %q is not a table of %s", table, path)
	}
	if len(t.Scopes) == 0 {
		return nil, fmt.Errorf("--table %q declares no scope", table)
	}
	sc := t.Scopes[0]
	col := t.ColumnIndex(sc.Column)
	if col < 0 {
		return nil, fmt.Errorf("scope %s reads unknown column %q", sc.Pattern, sc.Column)
	}
	if t.Columns[col].Type != schema.TypeString {
		return nil, fmt.Errorf("scope column %q must be a string column for the load fixture", sc.Column)
	}
	return &fixture{schema: s, table: t, codec: rowcodec.New(t), variable: sc.Variable, column: col}, nil
}

// scopes returns the requested scopes of a subscription to one scope value.
func (f *fixture) scopes(value string) (ssp2.ScopeLists, string) {
	m := map[string][]string{f.variable: {value}}
	b, _ := json.Marshal(m)
	return ssp2.ScopeListsFromMap(m), string(b)
}

// row fills vals with a deterministic row: the primary key id, the scope
// column scopeValue, every other column derived from n.
func (f *fixture) row(vals []rowcodec.Value, id, scopeValue string, n int64) []rowcodec.Value {
	vals = vals[:0]
	for i, c := range f.table.Columns {
		var v rowcodec.Value
		switch {
		case i == f.table.PKIndex:
			v = rowcodec.String(id)
		case i == f.column:
			v = rowcodec.String(scopeValue)
		default:
			v = cell(c, n)
		}
		vals = append(vals, v)
	}
	return vals
}

// cell is a synthetic value of column c for sequence number n.
func cell(c schema.Column, n int64) rowcodec.Value {
	switch c.Type {
	case schema.TypeString:
		return rowcodec.String(c.Name + " " + strconv.FormatInt(n, 10) + " lorem ipsum dolor sit amet")
	case schema.TypeInteger:
		return rowcodec.Int(1_700_000_000_000 + n)
	case schema.TypeFloat:
		return rowcodec.Float(float64(n) / 8)
	case schema.TypeBoolean:
		return rowcodec.Bool(n%2 == 0)
	case schema.TypeJSON:
		return rowcodec.JSON(`{"n":` + strconv.FormatInt(n, 10) + `}`)
	case schema.TypeBytes:
		return rowcodec.Bytes([]byte(strconv.FormatInt(n, 10)))
	}
	if c.Nullable {
		return rowcodec.Null()
	}
	return rowcodec.String(strconv.FormatInt(n, 10))
}

// payload encodes an upsert payload for the wire version: sparse rows at
// wire 3, full rows before.
func (f *fixture) payload(dst []byte, wire uint16, vals []rowcodec.Value) ([]byte, error) {
	if wire >= 3 {
		return f.codec.AppendSparse(dst, vals)
	}
	return f.codec.AppendRow(dst, vals)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

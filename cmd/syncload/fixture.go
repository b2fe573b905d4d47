package main

import (
	"fmt"
	"github.com/syncd-dev/syncd/examples/todos"
	"os"

	"github.com/syncd-dev/syncd/app/seed"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
)

// fixture is the table the load runs on: its codec and the one scope
// variable that gives each virtual client its own slice of the data.
type fixture struct {
	schema   *schema.Schema
	table    *schema.Table
	variable string // scope variable, e.g. project_id
	column   int    // the column the variable reads
}

func loadFixture(path, table string) (*fixture, error) {
	var s *schema.Schema
	var err error
	if path == "" {
		path = todos.Name
		s, err = schema.Load(todos.IR())
	} else {
		s, err = schema.LoadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("--schema %s: %w", path, err)
	}
	if table == "" {
		table = seed.DefaultTable(s)
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
	return &fixture{schema: s, table: t, variable: sc.Variable, column: col}, nil
}

// scopes returns the requested scopes of a subscription to one value.
func (f *fixture) scopes(value string) map[string][]string {
	return map[string][]string{f.variable: {value}}
}

// row returns a deterministic row: the primary key id, the scope column
// scopeValue, every other column derived from n.
func (f *fixture) row(id, scopeValue string, n int64) map[string]rowcodec.Value {
	cols := make(map[string]rowcodec.Value, len(f.table.Columns))
	for i, c := range f.table.Columns {
		switch {
		case i == f.table.PKIndex:
			cols[c.Name] = rowcodec.String(id)
		case i == f.column:
			cols[c.Name] = rowcodec.String(scopeValue)
		default:
			cols[c.Name] = seed.Cell(c, n)
		}
	}
	return cols
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

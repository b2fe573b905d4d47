package operations

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// MaxRowsLimit is the largest maxRows a registered query may declare
// (REMOTE.md §2: 1 through 10,000).
const MaxRowsLimit = 10000

// Op is a filter's comparison.
type Op string

// Filter comparisons.
const (
	OpEq  Op = "eq"
	OpNe  Op = "ne"
	OpLt  Op = "lt"
	OpLte Op = "lte"
	OpGt  Op = "gt"
	OpGte Op = "gte"
)

// SQL returns the comparison operator.
func (o Op) SQL() string {
	switch o {
	case OpEq:
		return "="
	case OpNe:
		return "<>"
	case OpLt:
		return "<"
	case OpLte:
		return "<="
	case OpGt:
		return ">"
	case OpGte:
		return ">="
	}
	return ""
}

// Filter compares a column with a parameter's value, or with a fixed
// value. Rows whose column is NULL never match (SQL comparison
// semantics, the same on both engines).
type Filter struct {
	Column string
	Op     Op
	// Param names the request parameter supplying the value.
	Param string
	// Literal is a fixed value instead of a parameter (Param empty): a
	// string, int64, float64 or bool, typed for the column by Compile (a
	// boolean column takes 0 and 1 as SQLite does). Generated descriptors
	// carry such comparisons (WHERE done = 0).
	Literal any
}

// Order sorts by a column. Strings sort in byte order on every engine.
type Order struct {
	Column string
	Desc   bool
}

// QuerySpec is a registered query stated against one synced table: the
// result columns, filters on columns compared with request parameters,
// the order and the row cap. The server runs it; no request text ever
// becomes SQL.
type QuerySpec struct {
	ID    string
	Table string
	// Columns are the result columns in order; empty means every column.
	Columns []string
	// Names are the result rows' keys, one per entry of Columns; empty
	// means the column names (a generated descriptor renames with AS).
	Names   []string
	Filters []Filter
	// OrderBy sorts the rows; the row id breaks ties, so results are
	// deterministic.
	OrderBy []Order
	// Limit keeps the first Limit rows of the order (a LIMIT clause); 0
	// keeps every row. MaxRows applies to what it keeps.
	Limit int
	// MaxRows is the row cap, 1..MaxRowsLimit: a result with more rows
	// fails with operation.result_too_large, never a partial result.
	MaxRows int
}

// Condition is a bound filter: the column compared with a value typed
// for the column (string, int64, float64 or bool).
type Condition struct {
	Column string
	Op     Op
	Value  any
}

// Plan is a QuerySpec checked against the compiled schema.
type Plan struct {
	spec   QuerySpec
	table  *schema.Table
	cols   []int                        // result column positions in the table
	keys   []string                     // result keys, one per entry of cols
	params map[string]schema.ColumnType // each parameter's type: its column's
	names  []string                     // parameter names, sorted
}

// Comparable reports whether filters, ordering and index lookups may use
// column c: of a type both engines compare alike (json is JSONB on
// PostgreSQL and text on SQLite; bytes, crdt and encrypted values are
// opaque).
func Comparable(c schema.Column) bool {
	if c.Encrypted {
		return false
	}
	switch c.Type {
	case schema.TypeString, schema.TypeInteger, schema.TypeFloat, schema.TypeBoolean:
		return true
	}
	return false
}

// Compile checks q against s: a non-empty id, a materialized table of s
// (REMOTE.md §2: a table with materialize false cannot be queried),
// distinct known result columns under distinct non-empty keys, filters
// and order on comparable columns, each parameter bound to one column
// type and each literal of its column's type, a limit that is not
// negative, and maxRows within 1..MaxRowsLimit.
func Compile(s *schema.Schema, q QuerySpec) (*Plan, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("remote query %q: %s", q.ID, fmt.Sprintf(format, args...))
	}
	if q.ID == "" {
		return nil, fmt.Errorf("remote query: empty id")
	}
	t := s.Table(q.Table)
	if t == nil {
		return nil, bad("unknown table %q", q.Table)
	}
	if !t.Materialize {
		return nil, bad("table %q is not materialized", q.Table)
	}
	if q.MaxRows < 1 || q.MaxRows > MaxRowsLimit {
		return nil, bad("maxRows %d is outside 1..%d", q.MaxRows, MaxRowsLimit)
	}
	if q.Limit < 0 {
		return nil, bad("limit %d is negative", q.Limit)
	}
	if len(q.Names) > 0 && len(q.Names) != len(q.Columns) {
		return nil, bad("%d result names for %d result columns", len(q.Names), len(q.Columns))
	}
	p := &Plan{spec: q, table: t, params: map[string]schema.ColumnType{}}
	p.spec.Columns = slices.Clone(q.Columns)
	p.spec.Names = slices.Clone(q.Names)
	p.spec.Filters = slices.Clone(q.Filters)
	p.spec.OrderBy = slices.Clone(q.OrderBy)
	if len(q.Columns) == 0 {
		for i, c := range t.Columns {
			p.cols = append(p.cols, i)
			p.spec.Columns = append(p.spec.Columns, c.Name)
		}
	}
	seen := map[string]bool{}
	for _, name := range q.Columns {
		i := t.ColumnIndex(name)
		if i < 0 {
			return nil, bad("unknown result column %q", name)
		}
		if seen[name] {
			return nil, bad("duplicate result column %q", name)
		}
		seen[name] = true
		p.cols = append(p.cols, i)
	}
	p.keys = p.spec.Columns
	if len(q.Names) > 0 {
		p.keys = p.spec.Names
		seen = map[string]bool{}
		for _, k := range q.Names {
			if k == "" || seen[k] {
				return nil, bad("result name %q is empty or repeated", k)
			}
			seen[k] = true
		}
	}
	for k, f := range q.Filters {
		i := t.ColumnIndex(f.Column)
		if i < 0 {
			return nil, bad("filter on unknown column %q", f.Column)
		}
		if !Comparable(t.Columns[i]) {
			return nil, bad("column %q of type %s cannot be filtered", f.Column, t.Columns[i].Type)
		}
		if f.Op.SQL() == "" {
			return nil, bad("unknown filter op %q", f.Op)
		}
		typ := t.Columns[i].Type
		switch {
		case f.Param != "" && f.Literal != nil:
			return nil, bad("filter on %q names a parameter and a literal", f.Column)
		case f.Literal != nil:
			v, err := ColumnValue(typ, f.Literal)
			if err != nil {
				return nil, bad("filter on %q: literal %v", f.Column, err)
			}
			p.spec.Filters[k].Literal = v
			continue
		case f.Param == "":
			return nil, bad("filter on %q names no parameter", f.Column)
		}
		if prev, ok := p.params[f.Param]; ok && prev != typ {
			return nil, bad("parameter %q compares with columns of types %s and %s", f.Param, prev, typ)
		}
		p.params[f.Param] = typ
	}
	for _, o := range q.OrderBy {
		i := t.ColumnIndex(o.Column)
		if i < 0 {
			return nil, bad("order by unknown column %q", o.Column)
		}
		if !Comparable(t.Columns[i]) {
			return nil, bad("column %q of type %s cannot be ordered by", o.Column, t.Columns[i].Type)
		}
	}
	for n := range p.params {
		p.names = append(p.names, n)
	}
	slices.Sort(p.names)
	return p, nil
}

// ColumnValue types a Go value for a column of type t the way both
// engines compare it: a string for a string column; an int64 or int, or
// an integral float64, for an integer column; a number for a float
// column; a bool, or SQLite's 0 and 1, for a boolean column.
func ColumnValue(t schema.ColumnType, v any) (any, error) {
	if i, ok := v.(int); ok {
		v = int64(i)
	}
	switch x := v.(type) {
	case string:
		if t == schema.TypeString {
			return x, nil
		}
	case int64:
		switch {
		case t == schema.TypeInteger:
			return x, nil
		case t == schema.TypeFloat:
			return float64(x), nil
		case t == schema.TypeBoolean && (x == 0 || x == 1):
			return x == 1, nil
		}
	case float64:
		switch {
		case t == schema.TypeFloat:
			return x, nil
		case t == schema.TypeInteger && x == math.Trunc(x) && math.Abs(x) <= maxSafeInteger:
			return int64(x), nil
		}
	case bool:
		if t == schema.TypeBoolean {
			return x, nil
		}
	}
	return nil, fmt.Errorf("%v (%T) does not fit column type %s", v, v, t)
}

// ID returns the operation id.
func (p *Plan) ID() string { return p.spec.ID }

// Table returns the queried table.
func (p *Plan) Table() *schema.Table { return p.table }

// MaxRows returns the row cap.
func (p *Plan) MaxRows() int { return p.spec.MaxRows }

// FetchLimit is how many rows to ask storage for: the query's limit when
// the cap cannot be passed under it, else one row past the cap, so a
// larger result is told apart from one that fits.
func (p *Plan) FetchLimit() int {
	if p.spec.Limit > 0 && p.spec.Limit <= p.spec.MaxRows {
		return p.spec.Limit
	}
	return p.spec.MaxRows + 1
}

// Columns returns the result column names in order.
func (p *Plan) Columns() []string { return slices.Clone(p.spec.Columns) }

// OrderBy returns the declared order.
func (p *Plan) OrderBy() []Order { return slices.Clone(p.spec.OrderBy) }

// Params returns the parameter names, sorted.
func (p *Plan) Params() []string { return slices.Clone(p.names) }

// Bind checks a request's params against the plan and returns the bound
// conditions in filter order. A query without parameters takes null or
// an empty object; otherwise params must be an object with exactly the
// declared parameters, each non-null and of its column's type (integer
// columns take integers, or numbers that are safe integers; float
// columns take numbers or integers). Any violation is
// operation.invalid_request.
func (p *Plan) Bind(params Value) ([]Condition, error) {
	values := map[string]any{}
	switch {
	case params.Kind() == KindNull && len(p.names) == 0:
	case params.Kind() == KindObject:
		fields, _ := params.Fields()
		for _, f := range fields {
			typ, ok := p.params[f.Key]
			if !ok {
				return nil, invalid(fmt.Sprintf("unknown parameter %q", f.Key))
			}
			v, err := paramValue(typ, f.Value)
			if err != nil {
				return nil, invalid(fmt.Sprintf("parameter %q: %v", f.Key, err))
			}
			values[f.Key] = v
		}
		for _, n := range p.names {
			if _, ok := values[n]; !ok {
				return nil, invalid(fmt.Sprintf("missing parameter %q", n))
			}
		}
	default:
		return nil, invalid("params must be an object")
	}
	out := make([]Condition, len(p.spec.Filters))
	for i, f := range p.spec.Filters {
		v := f.Literal
		if f.Param != "" {
			v = values[f.Param]
		}
		out[i] = Condition{Column: f.Column, Op: f.Op, Value: v}
	}
	return out, nil
}

func paramValue(t schema.ColumnType, v Value) (any, error) {
	switch t {
	case schema.TypeString:
		if s, ok := v.AsString(); ok {
			return s, nil
		}
	case schema.TypeInteger:
		if i, ok := v.AsInteger(); ok {
			return i, nil
		}
		if f, ok := v.AsNumber(); ok && f == math.Trunc(f) && math.Abs(f) <= maxSafeInteger {
			return int64(f), nil
		}
	case schema.TypeFloat:
		if f, ok := v.AsNumber(); ok {
			return f, nil
		}
		if i, ok := v.AsInteger(); ok {
			return float64(i), nil
		}
	case schema.TypeBoolean:
		if b, ok := v.AsBool(); ok {
			return b, nil
		}
	}
	return nil, fmt.Errorf("want a %s value, got %s", t, v.Kind())
}

// Row maps one stored row (decoded cells in table column order: nil,
// string, int64, float64, bool or []byte) to a result row of the plan's
// columns, normalized to their declared types the way REMOTE.md §2
// states: integers as numbers (safe integers only), floats as numbers,
// booleans, json as its text, bytes and crdt as bytes, strings and blob
// refs as strings. A missing cell, a null in a non-nullable column or a
// value the type cannot carry is operation.query_failed.
func (p *Plan) Row(cells []any) (Row, error) {
	if len(cells) != len(p.table.Columns) {
		return nil, syncerr.Newf(syncerr.OperationQueryFailed, "row has %d cells, table %q has %d columns", len(cells), p.table.Name, len(p.table.Columns))
	}
	row := make(Row, len(p.cols))
	for k, i := range p.cols {
		c := p.table.Columns[i]
		v, err := resultValue(c, cells[i])
		if err != nil {
			return nil, syncerr.Newf(syncerr.OperationQueryFailed, "column %q: %v", c.Name, err)
		}
		row[k] = Field{Key: p.keys[k], Value: v}
	}
	return row, nil
}

func resultValue(c schema.Column, cell any) (Value, error) {
	if cell == nil {
		if !c.Nullable {
			return Value{}, fmt.Errorf("null in a non-nullable column")
		}
		return Null(), nil
	}
	if c.Encrypted {
		if b, ok := cell.([]byte); ok {
			return Bytes(b), nil
		}
		return Value{}, fmt.Errorf("encrypted value is %T", cell)
	}
	switch c.Type {
	case schema.TypeString, schema.TypeBlobRef, schema.TypeJSON:
		if s, ok := cell.(string); ok {
			return String(s)
		}
	case schema.TypeInteger:
		if i, ok := cell.(int64); ok {
			if v, ok := SafeNumber(i); ok {
				return v, nil
			}
			return Value{}, fmt.Errorf("integer %s is not a safe integer", strconv.FormatInt(i, 10))
		}
	case schema.TypeFloat:
		if f, ok := cell.(float64); ok {
			return Number(f)
		}
	case schema.TypeBoolean:
		if b, ok := cell.(bool); ok {
			return Bool(b), nil
		}
	case schema.TypeBytes, schema.TypeCRDT:
		if b, ok := cell.([]byte); ok {
			return Bytes(b), nil
		}
	}
	return Value{}, fmt.Errorf("%T is not a %s value", cell, c.Type)
}

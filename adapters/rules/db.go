package rules

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Validators read other rows through the db variable, inside the push
// transaction (SPEC §6.7, §6.8 queryAuthoritative and scanRowsByIndex):
//
//	db.query(name, params)               a registered query or descriptor
//	db.lookup(table, index, values)      an exact index lookup (100 rows)
//	db.lookup(table, index, values, n)   the same, at most n (1..1000) rows
//
// Each returns a list of rows (column → value maps) over the candidate
// state, the commit's earlier writes included, within the commit's
// partition and without the caller's scopes: validators are server code.
const (
	dbTypeName = "syncd.DB"
	// maxDBCalls bounds the reads one evaluation makes: each is a
	// statement on the push transaction, which the partition waits for.
	maxDBCalls = 16
	// defaultLookupLimit is db.lookup's row limit without one.
	defaultLookupLimit = 100
)

var dbType = types.NewOpaqueType(dbTypeName)

// dbEnvOptions declares db and its functions; adapter turns the rows
// read into CEL values.
func dbEnvOptions(adapter types.Adapter) []cel.EnvOption {
	rows := cel.ListType(cel.DynType)
	return []cel.EnvOption{
		cel.Variable("db", dbType),
		cel.Function("query",
			cel.MemberOverload("syncd_db_query", []*cel.Type{dbType, cel.StringType, cel.MapType(cel.StringType, cel.DynType)}, rows,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val { return dbCall(args[0], adapter, queryCall(args[1:])) }))),
		cel.Function("lookup",
			cel.MemberOverload("syncd_db_lookup", []*cel.Type{dbType, cel.StringType, cel.StringType, cel.ListType(cel.DynType)}, rows,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return dbCall(args[0], adapter, lookupCall(args[1:], types.Int(defaultLookupLimit)))
				})),
			cel.MemberOverload("syncd_db_lookup_limit", []*cel.Type{dbType, cel.StringType, cel.StringType, cel.ListType(cel.DynType), cel.IntType}, rows,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val { return dbCall(args[0], adapter, lookupCall(args[1:4], args[4])) }))),
	}
}

// db is the db variable of one evaluation: the push transaction's reader
// and the registered queries.
type db struct {
	ctx     context.Context
	tx      ports.TxReader
	queries ports.TxQueries
	calls   int
	// err is the first failure of a read; a storage failure (not a
	// catalog error) ends the push as the storage's error, whatever the
	// rule made of it.
	err error
}

var _ ref.Val = (*db)(nil)

func (d *db) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("db cannot be converted")
}

func (d *db) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return dbType
	}
	return types.NewErr("db cannot be converted to %s", t.TypeName())
}

func (d *db) Equal(other ref.Val) ref.Val { return types.Bool(other == ref.Val(d)) }
func (d *db) Type() ref.Type              { return dbType }
func (d *db) Value() any                  { return d }

// storageErr is the read failure that must end the push as itself.
func (d *db) storageErr() error {
	if d == nil || d.err == nil {
		return nil
	}
	var se *syncerr.Error
	var ae argError
	if errors.As(d.err, &se) || errors.As(d.err, &ae) {
		return nil
	}
	return d.err
}

// argError is a rule passing db a value it cannot use: the rule's fault.
type argError struct{ error }

// dbRead is one read on the transaction.
type dbRead func(ctx context.Context, d *db) ([]ports.CandidateRow, error)

func dbCall(recv ref.Val, adapter types.Adapter, read dbRead) ref.Val {
	d, ok := recv.(*db)
	if !ok || d.tx == nil {
		return types.NewErr("db is not available here")
	}
	if d.calls >= maxDBCalls {
		return types.NewErr("a rule reads at most %d times per evaluation", maxDBCalls)
	}
	d.calls++
	rows, err := read(d.ctx, d)
	if err != nil {
		if d.err == nil {
			d.err = err
		}
		return types.WrapErr(err)
	}
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = map[string]any(r.Values)
	}
	return types.NewDynamicList(adapter, out)
}

func queryCall(args []ref.Val) dbRead {
	return func(ctx context.Context, d *db) ([]ports.CandidateRow, error) {
		name, _ := args[0].(types.String)
		m, ok := args[1].(traits.Mapper)
		if !ok {
			return nil, argError{errors.New("query params must be a map")}
		}
		params := map[string]any{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, argError{fmt.Errorf("query param names are strings, not %s", k.Type().TypeName())}
			}
			v, err := scalar(m.Get(k))
			if err != nil {
				return nil, argError{fmt.Errorf("query param %q: %w", string(ks), err)}
			}
			params[string(ks)] = v
		}
		if d.queries == nil {
			return nil, syncerr.Newf(syncerr.OperationUnknown, "no query operation %q (no operations are registered)", string(name))
		}
		return d.queries.QueryInTx(ctx, d.tx, string(name), params)
	}
}

func lookupCall(args []ref.Val, limit ref.Val) dbRead {
	return func(ctx context.Context, d *db) ([]ports.CandidateRow, error) {
		table, _ := args[0].(types.String)
		index, _ := args[1].(types.String)
		l, ok := args[2].(traits.Lister)
		if !ok {
			return nil, argError{errors.New("lookup values must be a list")}
		}
		n, _ := limit.(types.Int)
		var values []any
		for it := l.Iterator(); it.HasNext() == types.True; {
			v, err := scalar(it.Next())
			if err != nil {
				return nil, argError{fmt.Errorf("lookup value %d: %w", len(values), err)}
			}
			values = append(values, v)
		}
		return d.tx.ScanRowsByIndex(ctx, ports.IndexScan{Table: string(table), Index: string(index), Values: values, Limit: int(n)})
	}
}

// scalar is a query parameter or index value as the registry and the
// transaction reader type them.
func scalar(v ref.Val) (any, error) {
	switch x := v.(type) {
	case types.String:
		return string(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		if uint64(x) > 1<<63-1 {
			return nil, errors.New("integer out of range")
		}
		return int64(x), nil
	case types.Double:
		return float64(x), nil
	case types.Bool:
		return bool(x), nil
	case types.Null:
		return nil, nil
	}
	return nil, fmt.Errorf("want a string, number, bool or null, not %s", v.Type().TypeName())
}

// checkDBCalls checks the literal arguments of db.query and db.lookup
// against what the server serves, so a misspelt query, table or index
// fails the start rather than every push: the query name must be
// registered, the table and index declared, and a literal value list as
// long as the index.
func (c *compiler) checkDBCalls(a *cel.Ast, file, rule string, e expr) {
	native := a.NativeRep()
	visitCalls(native.Expr(), func(call ast.Expr) {
		fn := call.AsCall()
		if !fn.IsMemberFunction() || fn.Target().Kind() != ast.IdentKind || fn.Target().AsIdent() != "db" {
			return
		}
		args := fn.Args()
		loc := native.SourceInfo().GetStartLocation(call.ID())
		fail := func(msg string) { c.fail(exprError(file, rule, e, loc.Line(), loc.Column(), msg)) }
		switch fn.FunctionName() {
		case "query":
			if name, ok := stringLiteral(args[0]); ok && (c.queries == nil || !hasQuery(c.queries, name)) {
				fail(fmt.Sprintf("db.query: no registered query or descriptor %q (register it with --operations)", name))
			}
		case "lookup":
			table, ok := stringLiteral(args[0])
			if !ok {
				return
			}
			t := c.schema.Table(table)
			if t == nil {
				fail(fmt.Sprintf("db.lookup: table %q is not in the served schema", table))
				return
			}
			index, ok := stringLiteral(args[1])
			if !ok {
				return
			}
			for _, ix := range t.Indexes {
				if ix.Name != index {
					continue
				}
				if args[2].Kind() == ast.ListKind && args[2].AsList().Size() != len(ix.Columns) {
					fail(fmt.Sprintf("db.lookup: index %q of %q has %d columns, the values list %d", index, table, len(ix.Columns), args[2].AsList().Size()))
				}
				return
			}
			fail(fmt.Sprintf("db.lookup: table %q has no index %q", table, index))
		}
	})
}

func hasQuery(q ports.TxQueries, id string) bool {
	_, ok := q.QueryTable(id)
	return ok
}

func stringLiteral(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().Value().(string)
	return s, ok
}

// visitCalls calls f for every call expression in e.
func visitCalls(e ast.Expr, f func(ast.Expr)) {
	ast.PostOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if x.Kind() == ast.CallKind {
			f(x)
		}
	}))
}

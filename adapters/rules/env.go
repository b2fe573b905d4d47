package rules

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"

	"github.com/syncd-dev/syncd/domain/schema"
)

// Type names of the objects rules see.
const (
	rowTypePrefix = "syncd.rows."
	opTypeName    = "syncd.Operation"
)

// interruptEvery is how many comprehension iterations run between two
// looks at the context, so a cancelled push stops a long rule.
const interruptEvery = 100

// objectTypes declares the schema's rows, and the commit's operations,
// as CEL object types, so selecting a column the table lacks is a
// compile error and each column has its type. At run time the objects
// are plain map[string]any values: a row as the pipeline decoded it
// (ports.RowValues), an operation as opValues builds it.
type objectTypes struct {
	*types.Registry
	objects map[string]*objectType
}

type objectType struct {
	t      *types.Type
	names  []string
	fields map[string]*types.FieldType
}

func newObjectTypes(s *schema.Schema) (*objectTypes, error) {
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, err
	}
	o := &objectTypes{Registry: reg, objects: map[string]*objectType{}}
	for _, t := range s.Tables {
		fields := map[string]*types.Type{}
		for _, c := range t.Columns {
			ct := columnType(c)
			if c.Nullable {
				ct = types.NewNullableType(ct)
			}
			fields[c.Name] = ct
		}
		o.add(rowTypePrefix+t.Name, fields)
	}
	o.add(opTypeName, map[string]*types.Type{
		"index":  types.IntType,
		"op":     types.StringType,
		"table":  types.StringType,
		"rowId":  types.StringType,
		"row":    types.DynType,
		"stored": types.DynType,
	})
	return o, nil
}

// columnType is the CEL type of a column's value as ports.RowValues
// holds it: json and blob_ref columns as their JSON text, crdt and
// encrypted columns as bytes.
func columnType(c schema.Column) *types.Type {
	switch c.Type {
	case schema.TypeInteger:
		return types.IntType
	case schema.TypeFloat:
		return types.DoubleType
	case schema.TypeBoolean:
		return types.BoolType
	case schema.TypeBytes, schema.TypeCRDT:
		return types.BytesType
	default: // string, json, blob_ref
		return types.StringType
	}
}

func (o *objectTypes) add(name string, fields map[string]*types.Type) {
	ot := &objectType{t: types.NewObjectType(name), fields: map[string]*types.FieldType{}}
	for f, ft := range fields {
		ot.names = append(ot.names, f)
		ot.fields[f] = &types.FieldType{Type: ft, IsSet: fieldSet(f), GetFrom: fieldGet(f)}
	}
	sort.Strings(ot.names)
	o.objects[name] = ot
}

// fieldSet reports a field present when it holds a value: a NULL column
// is absent to has(), as a wrapper field of a message is.
func fieldSet(name string) func(any) bool {
	return func(target any) bool {
		m, ok := target.(map[string]any)
		return ok && m[name] != nil
	}
}

// errNullObject is selecting a field of a null row (row on a delete,
// stored on an insert).
var errNullObject = errors.New("field of a null row (row is null on a delete, stored on an insert)")

// fieldGet reads a field; an absent column reads as null.
func fieldGet(name string) func(any) (any, error) {
	return func(target any) (any, error) {
		m, ok := target.(map[string]any)
		if !ok || m == nil {
			return nil, errNullObject
		}
		return m[name], nil
	}
}

// FindStructType implements types.Provider.
func (o *objectTypes) FindStructType(name string) (*types.Type, bool) {
	if ot, ok := o.objects[name]; ok {
		return types.NewTypeTypeWithParam(ot.t), true
	}
	return o.Registry.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (o *objectTypes) FindStructFieldNames(name string) ([]string, bool) {
	if ot, ok := o.objects[name]; ok {
		return append([]string(nil), ot.names...), true
	}
	return o.Registry.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (o *objectTypes) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if ot, ok := o.objects[name]; ok {
		ft, found := ot.fields[field]
		return ft, found
	}
	return o.Registry.FindStructFieldType(name, field)
}

// NewValue implements types.Provider: rules read rows, never build them.
func (o *objectTypes) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := o.objects[name]; ok {
		return types.NewErr("rules cannot construct %s values", name)
	}
	return o.Registry.NewValue(name, fields)
}

// baseEnv is what every rule sees: the standard library with optional
// values, the string, list, set and math extensions, and the actor and
// partition of the request.
func baseEnv(o *objectTypes) (*cel.Env, error) {
	return cel.NewEnv(
		cel.CustomTypeProvider(o),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		cel.ASTValidators(cel.ValidateRegexLiterals(), cel.ValidateDurationLiterals(), cel.ValidateTimestampLiterals()),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
		ext.Math(),
		cel.Variable("actor", cel.StringType),
		cel.Variable("partition", cel.StringType),
	)
}

// scopesEnv adds the credential's claims and the client id.
func scopesEnv(base *cel.Env) (*cel.Env, error) {
	return base.Extend(
		cel.Variable("claims", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("clientId", cel.StringType),
	)
}

// rowEnv adds one table's operation: its kind, row id, and the row that
// will persist and the stored one, typed by the table's columns.
func rowEnv(base *cel.Env, table string) (*cel.Env, error) {
	rt := cel.ObjectType(rowTypePrefix + table)
	return base.Extend(
		cel.Variable("op", cel.StringType),
		cel.Variable("rowId", cel.StringType),
		cel.Variable("row", rt),
		cel.Variable("stored", rt),
	)
}

// commitEnv adds the commit: its operations and its ids.
func commitEnv(base *cel.Env) (*cel.Env, error) {
	return base.Extend(
		cel.Variable("ops", cel.ListType(cel.ObjectType(opTypeName))),
		cel.Variable("clientId", cel.StringType),
		cel.Variable("clientCommitId", cel.StringType),
	)
}

// compiled is one checked expression, ready to run.
type compiled struct {
	ast *cel.Ast
	prg cel.Program
}

// compile parses and type-checks e in env and checks its output type
// with want (nil: any). Problems are *Errors at e's lines.
func compile(env *cel.Env, file, rule string, e expr, costLimit uint64, want func(*types.Type) string) (*compiled, error) {
	a, iss := env.Compile(e.src)
	if iss != nil && iss.Err() != nil {
		var errs []error
		for _, ce := range iss.Errors() {
			errs = append(errs, exprError(file, rule, e, ce.Location.Line(), ce.Location.Column(), ce.Message))
		}
		return nil, errors.Join(errs...)
	}
	if want != nil {
		if msg := want(a.OutputType()); msg != "" {
			return nil, &Error{File: file, Line: e.line, Rule: rule, Msg: msg}
		}
	}
	prg, err := env.Program(a,
		cel.CostLimit(costLimit),
		cel.InterruptCheckFrequency(interruptEvery),
		cel.EvalOptions(cel.OptOptimize),
	)
	if err != nil {
		return nil, &Error{File: file, Line: e.line, Rule: rule, Msg: err.Error()}
	}
	return &compiled{ast: a, prg: prg}, nil
}

// exprError places a CEL problem at its file line (and column, when the
// expression starts on its key's line).
func exprError(file, rule string, e expr, line, col int, msg string) *Error {
	if line < 1 {
		line = 1
	}
	out := &Error{File: file, Line: e.line + line - 1, Rule: rule, Msg: msg}
	if line == 1 && e.col > 0 && col >= 0 {
		out.Msg = fmt.Sprintf("%s (column %d)", msg, e.col+col)
	}
	return out
}

// wantType checks that a rule's expression has the type t (or dyn,
// decided at run time); what names the expression in the error.
func wantType(t *types.Type, what string) func(*types.Type) string {
	return func(got *types.Type) string {
		if got.IsExactType(t) || got.IsExactType(types.DynType) {
			return ""
		}
		return fmt.Sprintf("%s must be %s %s, this one is a %s", what, article(t.String()), t, got)
	}
}

func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an"
	}
	return "a"
}

var (
	wantBool = wantType(types.BoolType, "a validator rule")
	wantInt  = wantType(types.IntType, "opIndex")
)

// scopesType is what the scopes rule returns: variable → values.
var scopesType = types.NewMapType(types.StringType, types.NewListType(types.StringType))

// wantScopes checks the scopes rule's type: a map of string lists, or
// something that may hold one at run time (dyn parts).
func wantScopes(t *types.Type) string {
	if assignable(scopesType, t) {
		return ""
	}
	return fmt.Sprintf("the scopes rule must be a map(string, list(string)) (scope variable to values), this one is a %s", t)
}

// assignable reports whether a value of type from fits to, dyn fitting
// anything (the type checker's rule for rule outputs).
func assignable(to, from *types.Type) bool {
	if from.IsExactType(types.DynType) || to.IsExactType(types.DynType) {
		return true
	}
	if to.Kind() != from.Kind() {
		return false
	}
	switch to.Kind() {
	case types.ListKind, types.MapKind:
		tp, fp := to.Parameters(), from.Parameters()
		if len(tp) != len(fp) {
			return false
		}
		for i := range tp {
			if !assignable(tp[i], fp[i]) {
				return false
			}
		}
		return true
	}
	return to.IsExactType(from)
}

// literalMapKeys returns the constant string keys of a map literal at the
// top of the expression (the usual shape of a scopes rule), with their
// offsets, for checking them against the schema's scope variables.
func literalMapKeys(a *cel.Ast) []mapKey {
	native := a.NativeRep()
	e := native.Expr()
	if e.Kind() != ast.MapKind {
		return nil
	}
	var out []mapKey
	for _, ent := range e.AsMap().Entries() {
		k := ent.AsMapEntry().Key()
		if k.Kind() != ast.LiteralKind {
			continue
		}
		s, ok := k.AsLiteral().Value().(string)
		if !ok {
			continue
		}
		loc := native.SourceInfo().GetStartLocation(k.ID())
		out = append(out, mapKey{name: s, line: loc.Line(), col: loc.Column()})
	}
	return out
}

type mapKey struct {
	name      string
	line, col int
}

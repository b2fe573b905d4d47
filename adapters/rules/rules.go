// Package rules runs declarative rules written in CEL (the Common
// Expression Language, cel.dev/cel-go) behind the server's ports: a
// scopes rule computing an actor's allowed scopes from the credential's
// claims (a ports.ScopeResolver), per-table row validators (each table's
// ports.RowValidator), commit validators (a ports.CommitValidator) and
// reaction rules planning durable reactions (a ports.ReactionPlanner).
//
// The rules come from one YAML file (docs/rules.md) and are compiled and
// type-checked against the served schema when they are loaded: a rule
// naming an unknown table or column, a validator that is not a bool, a
// scopes rule that is not a map of string lists, a reserved rejection
// code — each is an *Error naming the file, the line and the rule. Every
// evaluation runs under a cost limit and stops when its context ends, so
// a rule never hangs a push. A rule that rejects returns the same
// *ports.ValidationRejection a Go validator of the same meaning would;
// one that fails (its cost limit, a runtime error) returns a plain error,
// which the push pipeline answers as sync.constraint_violation.
package rules

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

// maxFileBytes bounds the rules file.
const maxFileBytes = 1 << 20

// Options configure Load and Parse.
type Options struct {
	// Schema is the served schema the rules are checked against. Required.
	Schema *schema.Schema
	// Log receives a line per rule that fails at run time (default: none).
	Log *zap.Logger
	// Queries are the registered queries db.query runs (nil: none), and
	// checks literal names against when the rules load.
	Queries ports.TxQueries
}

// Rules is a compiled rules file.
type Rules struct {
	file      string
	costLimit uint64
	log       *zap.Logger
	queries   ports.TxQueries
	scopes    *scopeResolver
	rows      []*rowValidator
	commit    *commitValidator
	reactions *reactionPlanner
}

// Load reads and compiles the rules file at path.
func Load(path string, o Options) (*Rules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("rules: %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("rules: %s is larger than %d bytes", path, maxFileBytes)
	}
	return Parse(path, data, o)
}

// Parse compiles a rules file's text; name is the file name errors give.
// Every problem found is reported, each an *Error, joined.
func Parse(name string, data []byte, o Options) (*Rules, error) {
	if o.Schema == nil {
		return nil, errors.New("rules: a schema is required")
	}
	spec, err := parseFile(name, data)
	if err != nil {
		return nil, err
	}
	r := &Rules{file: name, costLimit: spec.costLimit, log: o.Log, queries: o.Queries}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	c, err := newCompiler(name, o.Schema, spec.costLimit, o.Queries)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if spec.scopes != nil {
		r.scopes = c.scopes(r, *spec.scopes)
	}
	for _, table := range spec.tables {
		if v := c.table(r, table, spec.tableLines[table], spec.validators[table]); v != nil {
			r.rows = append(r.rows, v)
		}
	}
	if len(spec.commit) > 0 {
		r.commit = c.commit(r, spec.commit)
	}
	if len(spec.reactions) > 0 {
		r.reactions = c.reactions(r, spec.reactions)
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	if r.scopes == nil && len(r.rows) == 0 && r.commit == nil && r.reactions == nil {
		return nil, &Error{File: name, Line: 1, Msg: "no rules: want " + sections}
	}
	return r, nil
}

// File is the name the rules were loaded from.
func (r *Rules) File() string { return r.file }

// CostLimit is the cost limit of one rule evaluation.
func (r *Rules) CostLimit() uint64 { return r.costLimit }

// RowValidators returns one validator per table that has rules.
func (r *Rules) RowValidators() []ports.RowValidator {
	out := make([]ports.RowValidator, len(r.rows))
	for i, v := range r.rows {
		out[i] = v
	}
	return out
}

// CommitValidator returns the commit validator, nil without commit rules.
func (r *Rules) CommitValidator() ports.CommitValidator {
	if r.commit == nil {
		return nil
	}
	return r.commit
}

// ScopeResolver returns the scopes rule's resolver, nil without one.
func (r *Rules) ScopeResolver() ports.ScopeResolver {
	if r.scopes == nil {
		return nil
	}
	return r.scopes
}

// compiler compiles a file's rules, collecting every error.
type compiler struct {
	file      string
	schema    *schema.Schema
	costLimit uint64
	queries   ports.TxQueries
	base      *cel.Env
	// tx is base with db, for the rules that run inside a push.
	tx   *cel.Env
	errs []error
}

func newCompiler(file string, s *schema.Schema, costLimit uint64, queries ports.TxQueries) (*compiler, error) {
	ot, err := newObjectTypes(s)
	if err != nil {
		return nil, err
	}
	base, err := baseEnv(ot)
	if err != nil {
		return nil, err
	}
	tx, err := base.Extend(dbEnvOptions(ot)...)
	if err != nil {
		return nil, err
	}
	return &compiler{file: file, schema: s, costLimit: costLimit, queries: queries, base: base, tx: tx}, nil
}

func (c *compiler) fail(err error) { c.errs = append(c.errs, err) }

func (c *compiler) scopes(r *Rules, e expr) *scopeResolver {
	env, err := scopesEnv(c.base)
	if err != nil {
		c.fail(err)
		return nil
	}
	prg, err := compile(env, c.file, "scopes", e, c.costLimit, wantScopes)
	if err != nil {
		c.fail(err)
		return nil
	}
	declared := c.schema.ScopeVariables()
	for _, k := range literalMapKeys(prg.ast) {
		if !declared[k.name] {
			c.fail(exprError(c.file, "scopes", e, k.line, k.col,
				fmt.Sprintf("scope variable %q is not declared by any table (declared: %s)", k.name, strings.Join(sortedKeys(declared), ", "))))
		}
	}
	return &scopeResolver{r: r, rule: evaluable{id: "scopes", line: e.line, prg: prg.prg}}
}

func (c *compiler) table(r *Rules, table string, line int, specs []ruleSpec) *rowValidator {
	if c.schema.Table(table) == nil {
		names := make([]string, len(c.schema.Tables))
		for i, t := range c.schema.Tables {
			names[i] = t.Name
		}
		c.fail(&Error{File: c.file, Line: line, Msg: fmt.Sprintf("validators: table %q is not in the served schema (tables: %s)", table, strings.Join(names, ", "))})
		return nil
	}
	env, err := rowEnv(c.tx, table)
	if err != nil {
		c.fail(err)
		return nil
	}
	v := &rowValidator{r: r, table: table}
	for _, s := range specs {
		e, rej, ok := c.rule(env, s)
		if !ok {
			continue
		}
		rr := &rowRule{evaluable: e, rej: rej}
		rr.upsert = len(s.on) == 0 || slices.Contains(s.on, commit.OpUpsert)
		rr.delete = slices.Contains(s.on, commit.OpDelete)
		v.rules = append(v.rules, rr)
	}
	if len(v.rules) == 0 {
		return nil
	}
	return v
}

func (c *compiler) commit(r *Rules, specs []ruleSpec) *commitValidator {
	env, err := commitEnv(c.tx)
	if err != nil {
		c.fail(err)
		return nil
	}
	v := &commitValidator{r: r}
	for _, s := range specs {
		e, rej, ok := c.rule(env, s)
		cr := &commitRule{evaluable: e, rej: rej}
		if s.opIndex != nil {
			idx, err := compile(env, c.file, s.id, *s.opIndex, c.costLimit, wantInt)
			if err != nil {
				c.fail(err)
				continue
			}
			c.checkDBCalls(idx.ast, c.file, s.id, *s.opIndex)
			cr.opIndex = &evaluable{id: s.id + " (opIndex)", line: s.opIndex.line, prg: idx.prg}
		}
		if ok {
			v.rules = append(v.rules, cr)
		}
	}
	if len(v.rules) == 0 {
		return nil
	}
	return v
}

// rule compiles a validator rule and its rejection; ok when both are
// sound (the problems of both are reported).
func (c *compiler) rule(env *cel.Env, s ruleSpec) (evaluable, ports.ValidationRejection, bool) {
	rej, ok := c.rejection(s)
	prg, err := compile(env, c.file, s.id, s.rule, c.costLimit, wantBool)
	if err != nil {
		c.fail(err)
		return evaluable{}, rej, false
	}
	c.checkDBCalls(prg.ast, c.file, s.id, s.rule)
	return evaluable{id: s.id, line: s.line, prg: prg.prg}, rej, ok
}

// rejection builds a rule's rejection once, refusing what
// ports.NewValidationRejection refuses (a reserved code, bad details).
func (c *compiler) rejection(s ruleSpec) (ports.ValidationRejection, bool) {
	if s.message == "" {
		c.fail(&Error{File: c.file, Line: s.line, Rule: s.id, Msg: "message: want the text the client gets"})
		return ports.ValidationRejection{}, false
	}
	rej, err := ports.NewValidationRejection(s.code, s.message, s.details)
	if err != nil {
		c.fail(&Error{File: c.file, Line: s.line, Rule: s.id, Msg: err.Error()})
		return ports.ValidationRejection{}, false
	}
	return *rej, true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// evaluable is one compiled expression of a rule.
type evaluable struct {
	id   string
	line int
	prg  cel.Program
}

// errCostLimit is a rule stopped by its cost limit.
var errCostLimit = errors.New("cost limit exceeded")

// RuleError is a rule that failed to evaluate: it went over its cost
// limit or met a runtime error (a field of a null row, a failed
// conversion). The push pipeline answers it as any unexpected validator
// error, sync.constraint_violation with a fixed message.
type RuleError struct {
	File string
	Line int
	Rule string
	// Cause is errCostLimit for the cost limit, or CEL's error.
	Cause error
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("rules: %s:%d: rule %s failed: %v", e.File, e.Line, e.Rule, e.Cause)
}

func (e *RuleError) Unwrap() error { return e.Cause }

// IsCostLimit reports whether err is a rule stopped by its cost limit.
func IsCostLimit(err error) bool { return errors.Is(err, errCostLimit) }

// eval runs the expression; a context that ends stops it with the
// context's error.
func (e *evaluable) eval(ctx context.Context, act interpreter.Activation) (ref.Val, error) {
	out, _, err := e.prg.ContextEval(ctx, act)
	if err == nil {
		return out, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		err = errCostLimit
	}
	return nil, err
}

// evalBool runs a validator rule.
func (e *evaluable) evalBool(ctx context.Context, act interpreter.Activation) (bool, error) {
	out, err := e.eval(ctx, act)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the rule gave a %s, not a bool", out.Type().TypeName())
	}
	return bool(b), nil
}

// failed reports a rule that could not decide: logged (the rule's file,
// line and name; CEL's text, which may quote row values, at debug only)
// and returned as a *RuleError. A context error passes through as is.
func (r *Rules) failed(ctx context.Context, e *evaluable, partition string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	cause := "evaluation error"
	if errors.Is(err, errCostLimit) {
		cause = fmt.Sprintf("cost limit %d exceeded", r.costLimit)
	}
	fields := []zap.Field{zap.String("rules_file", r.file), zap.Int("line", e.line), zap.String("rule", e.id),
		zap.String("partition", partition), zap.String("cause", cause)}
	r.log.Warn("rule failed", fields...)
	r.log.Debug("rule failed: evaluation detail", append(fields, zap.Error(err))...)
	return &RuleError{File: r.file, Line: e.line, Rule: e.id, Cause: err}
}

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/uptrace/bun"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Storage spans, built only when Config.Tracer is set (no wrapper, no
// context value otherwise). The hot statements bypass bun (fixed
// parameterized texts on database/sql), so spans come from wrappers of the
// dialect's write transactions and of the pools; bun's own queries (rare
// administrative reads) from a query hook. A span is named by operation
// and table; it never carries the statement's text or arguments.

// tracerName is the instrumentation scope of the storage spans.
const tracerName = "github.com/syncd-dev/syncd/adapters/storage/sqlstore"

type tracer struct {
	t      trace.Tracer
	system attribute.KeyValue
}

func newTracer(tp trace.TracerProvider, d Dialect) *tracer {
	sys := semconv.DBSystemNameKey.String(d.Name())
	switch d.Name() {
	case "postgres":
		sys = semconv.DBSystemNamePostgreSQL
	case "sqlite":
		sys = semconv.DBSystemNameSQLite
	}
	return &tracer{t: tp.Tracer(tracerName), system: sys}
}

// traceStorage wraps the dialect and the reader of c in spans and hooks
// the bun handles.
func traceStorage(c Config) Config {
	tr := newTracer(c.Tracer, c.Dialect)
	td := &tracedDialect{Dialect: c.Dialect, tr: tr}
	if a, ok := c.Dialect.(Analyzer); ok {
		c.Dialect = tracedAnalyzer{td, a}
	} else {
		c.Dialect = td
	}
	if c.Reader != nil {
		c.Reader = tracedQuerier{q: c.Reader, tr: tr}
	}
	if c.Direct != nil {
		c.Direct = tracedDirect{d: c.Direct, tr: tr}
	}
	hook := bunHook{tr: tr}
	same := c.ReadDB == c.DB
	if c.DB != nil {
		c.DB = c.DB.WithQueryHook(hook)
	}
	if same {
		c.ReadDB = c.DB
	} else if c.ReadDB != nil {
		c.ReadDB = c.ReadDB.WithQueryHook(hook)
	}
	return c
}

type opKey struct{}

// withOp names the write transactions begun under ctx (no-op untraced).
func (s *Store) withOp(ctx context.Context, op string) context.Context {
	if !s.traced {
		return ctx
	}
	return context.WithValue(ctx, opKey{}, op)
}

// tracedDialect opens traced transactions and autocommit pools.
type tracedDialect struct {
	Dialect
	tr *tracer
}

// tracedAnalyzer keeps a dialect's statistics refresh visible.
type tracedAnalyzer struct {
	*tracedDialect
	Analyzer
}

func (d *tracedDialect) Begin(ctx context.Context) (WriteTx, error) {
	op, _ := ctx.Value(opKey{}).(string)
	if op == "" {
		op = "write"
	}
	parent := trace.SpanContextFromContext(ctx)
	sctx, span := d.tr.t.Start(ctx, op+" transaction", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(d.tr.system, semconv.DBOperationName(op)))
	tx, err := d.Dialect.Begin(sctx)
	if err != nil {
		endSpan(span, err)
		return nil, err
	}
	return &tracedTx{tx: tx, tr: d.tr, span: span, parent: parent}, nil
}

func (d *tracedDialect) Autocommit() Querier {
	q := d.Dialect.Autocommit()
	if q == nil {
		return nil
	}
	return tracedQuerier{q: q, tr: d.tr}
}

// tracedTx is a write transaction whose span lasts until Commit or
// Rollback. Statements run under the context the transaction was begun in
// become its children; those of other requests sharing it (SQLite's group
// commit) stay under their own request's span.
type tracedTx struct {
	tx     WriteTx
	tr     *tracer
	span   trace.Span
	parent trace.SpanContext
}

func (t *tracedTx) stmtCtx(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).Equal(t.parent) {
		return trace.ContextWithSpan(ctx, t.span)
	}
	return ctx
}

func (t *tracedTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx, span := t.tr.stmt(t.stmtCtx(ctx), q)
	r, err := t.tx.ExecContext(ctx, q, args...)
	endSpan(span, err)
	return r, err
}

func (t *tracedTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx, span := t.tr.stmt(t.stmtCtx(ctx), q)
	r, err := t.tx.QueryContext(ctx, q, args...)
	endSpan(span, err)
	return r, err
}

func (t *tracedTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	ctx, span := t.tr.stmt(t.stmtCtx(ctx), q)
	r := t.tx.QueryRowContext(ctx, q, args...)
	endSpan(span, r.Err())
	return r
}

func (t *tracedTx) Commit() error {
	err := t.tx.Commit()
	t.span.SetAttributes(attribute.String("db.transaction.outcome", "commit"))
	endSpan(t.span, err)
	return err
}

func (t *tracedTx) Rollback() error {
	err := t.tx.Rollback()
	t.span.SetAttributes(attribute.String("db.transaction.outcome", "rollback"))
	endSpan(t.span, nil)
	return err
}

// tracedQuerier runs each statement in a span.
type tracedQuerier struct {
	q  Querier
	tr *tracer
}

func (t tracedQuerier) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx, span := t.tr.stmt(ctx, q)
	r, err := t.q.ExecContext(ctx, q, args...)
	endSpan(span, err)
	return r, err
}

func (t tracedQuerier) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx, span := t.tr.stmt(ctx, q)
	r, err := t.q.QueryContext(ctx, q, args...)
	endSpan(span, err)
	return r, err
}

func (t tracedQuerier) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	ctx, span := t.tr.stmt(ctx, q)
	r := t.q.QueryRowContext(ctx, q, args...)
	endSpan(span, r.Err())
	return r
}

// tracedDirect runs each direct read in a span that, unlike a query's,
// lasts until its rows have been read (they are read inside the call).
type tracedDirect struct {
	d  DirectReader
	tr *tracer
}

func (t tracedDirect) ReadDirect(ctx context.Context, q string, args []any, each func(DirectRow) error) error {
	ctx, span := t.tr.stmt(ctx, q)
	err := t.d.ReadDirect(ctx, q, args, each)
	endSpan(span, err)
	return err
}

// stmt starts a statement span. A query's span ends when its rows are
// returned, not when they have been read.
func (tr *tracer) stmt(ctx context.Context, query string) (context.Context, trace.Span) {
	op, table := statementTarget(query)
	name := op
	attrs := []attribute.KeyValue{tr.system, semconv.DBOperationName(op)}
	if table != "" {
		name += " " + table
		attrs = append(attrs, semconv.DBCollectionName(table))
	}
	return tr.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan ends span, marking a failure by its kind and engine status code
// (SQLSTATE, SQLite result code), never by its text: driver messages may
// quote values.
func endSpan(span trace.Span, err error) {
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		span.SetStatus(codes.Error, "")
		span.SetAttributes(semconv.ErrorType(err))
		if c := engineCode(err); c != "" {
			span.SetAttributes(semconv.DBResponseStatusCode(c))
		}
	}
	span.End()
}

func engineCode(err error) string {
	for err != nil {
		switch e := err.(type) {
		case interface{ SQLState() string }:
			return e.SQLState()
		case interface{ Code() int }:
			return strconv.Itoa(e.Code())
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return ""
		}
		err = u.Unwrap()
	}
	return ""
}

// statementTarget reads a statement's operation (its first keyword) and
// the table it reads or writes, when the text names one plainly.
func statementTarget(q string) (op, table string) {
	q = strings.TrimLeft(q, " \t\r\n(")
	end := strings.IndexAny(q, " \t\r\n(")
	if end < 0 {
		end = len(q)
	}
	op = strings.ToUpper(q[:end])
	if len(op) > 16 {
		op = op[:16]
	}
	rest := q[end:]
	var after string
	switch op {
	case "SELECT", "DELETE":
		after = "FROM "
	case "INSERT", "REPLACE":
		after = "INTO "
	case "UPDATE":
		return op, firstWord(rest)
	case "WITH":
		// A data-modifying CTE: name the first table written.
		for _, kw := range []string{"INSERT INTO ", "UPDATE ", "DELETE FROM "} {
			if i := strings.Index(rest, kw); i >= 0 {
				return op, firstWord(rest[i+len(kw):])
			}
		}
		return op, ""
	default:
		return op, ""
	}
	if i := strings.Index(rest, after); i >= 0 {
		return op, firstWord(rest[i+len(after):])
	}
	return op, ""
}

func firstWord(s string) string {
	s = strings.TrimLeft(s, " \t\r\n")
	end := strings.IndexAny(s, " \t\r\n(),;")
	if end >= 0 {
		s = s[:end]
	}
	s = strings.Trim(s, `"`+"`")
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// bunHook traces bun's own queries. Its span names the operation and the
// model's table; bun inlines arguments into the text, so the text is
// never recorded.
type bunHook struct{ tr *tracer }

func (h bunHook) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	op := e.Operation()
	name := op
	attrs := []attribute.KeyValue{h.tr.system, semconv.DBOperationName(op)}
	if e.IQuery != nil {
		if t := strings.Trim(e.IQuery.GetTableName(), `"`+"`"); t != "" {
			name += " " + t
			attrs = append(attrs, semconv.DBCollectionName(t))
		}
	}
	ctx, _ = h.tr.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

func (h bunHook) AfterQuery(ctx context.Context, e *bun.QueryEvent) {
	endSpan(trace.SpanFromContext(ctx), e.Err)
}

package sqlstore

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestStatementTarget(t *testing.T) {
	for _, c := range []struct{ q, op, table string }{
		{"SELECT max_commit_seq FROM sync_partitions WHERE partition=?", "SELECT", "sync_partitions"},
		{"  insert into x VALUES (?)", "INSERT", ""},
		{"INSERT INTO sync_commits(partition, commit_seq) VALUES (?, ?)", "INSERT", "sync_commits"},
		{`INSERT INTO "items" (a) VALUES ($1)`, "INSERT", "items"},
		{"UPDATE sync_partitions SET max_commit_seq=? WHERE partition=?", "UPDATE", "sync_partitions"},
		{"DELETE FROM sync_row_scopes WHERE partition=?", "DELETE", "sync_row_scopes"},
		{"WITH up AS (INSERT INTO items(a) VALUES ($1) RETURNING 1) SELECT 1", "WITH", "items"},
		{"WITH r AS (SELECT 1) SELECT * FROM r", "WITH", ""},
		{"SELECT 1", "SELECT", ""},
		{"SAVEPOINT sync_push_apply", "SAVEPOINT", ""},
		{"(SELECT a FROM t1) UNION (SELECT a FROM t2)", "SELECT", "t1"},
		{"", "", ""},
	} {
		op, table := statementTarget(c.q)
		if op != c.op || table != c.table {
			t.Errorf("statementTarget(%q) = %q, %q; want %q, %q", c.q, op, table, c.op, c.table)
		}
	}
}

type directFunc func(ctx context.Context, q string, args []any, each func(DirectRow) error) error

func (f directFunc) ReadDirect(ctx context.Context, q string, args []any, each func(DirectRow) error) error {
	return f(ctx, q, args, each)
}

// A direct read's span is the statement's child of the caller and lasts
// through the read; a failed read marks it failed.
func TestTracedDirectRead(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		code codes.Code
	}{
		{"read", nil, codes.Unset},
		{"failed read", errors.New("boom"), codes.Error},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			d := traceStorage(Config{Tracer: tp, Dialect: namedDialect{}, Direct: directFunc(func(ctx context.Context, _ string, _ []any, _ func(DirectRow) error) error {
				if n := len(rec.Ended()); n != 0 {
					t.Errorf("%d spans ended before the read did", n)
				}
				if !trace.SpanContextFromContext(ctx).IsValid() {
					t.Error("the read runs outside its span")
				}
				return c.err
			})}).Direct
			ctx, req := tp.Tracer("test").Start(context.Background(), "request")
			if err := d.ReadDirect(ctx, "SELECT commit_seq FROM sync_changes WHERE partition=?", []any{"p"}, nil); !errors.Is(err, c.err) {
				t.Fatalf("got %v, want %v", err, c.err)
			}
			req.End()
			spans := rec.Ended()
			if len(spans) != 2 || spans[0].Name() != "SELECT sync_changes" || spans[0].Parent().SpanID() != req.SpanContext().SpanID() {
				t.Fatalf("spans %v", spans)
			}
			if got := spans[0].Status().Code; got != c.code {
				t.Errorf("status %v, want %v", got, c.code)
			}
		})
	}
}

// namedDialect is only a name for the tracer.
type namedDialect struct{ Dialect }

func (namedDialect) Name() string { return "sqlite" }

package storetest

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/ports"
)

// Tracing checks the storage spans of a store opened with a tracer: a
// push is a transaction span under the caller's span with its statements
// as children, reads outside transactions and bun's queries are statement
// spans under the caller's span, every span names the database system, and
// no span carries a bound value.
func Tracing(t *testing.T, system string, open func(t testing.TB, tp trace.TracerProvider) *sqlstore.Store) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := open(t, tp)
	if err := s.EnsureSchema(context.Background(), Schema(t, IR), nil); err != nil {
		t.Fatal(err)
	}
	const secret = "title-that-must-not-leak"
	ctx, req := tp.Tracer("test").Start(context.Background(), "request")
	w := Item("i1", "o1", 0)
	w.Values[2] = secret
	if _, err := PushItems(ctx, s, "p-secret", []ports.RowWrite{w}, "cc1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListPartitions(ctx); err != nil {
		t.Fatal(err)
	}
	req.End()

	spans := rec.Ended()
	t.Logf("spans: %v", names(spans))
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID()] = sp
	}
	reqID := req.SpanContext().SpanID()
	var tx sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if sp.Name() == "push transaction" {
			tx = sp
		}
	}
	if tx == nil {
		t.Fatalf("no push transaction span among %v", names(spans))
	}
	if tx.Parent().SpanID() != reqID {
		t.Fatalf("push transaction's parent is %v, want the caller's span", tx.Parent().SpanID())
	}
	under := func(sp sdktrace.ReadOnlySpan, parent trace.SpanID) bool { return sp.Parent().SpanID() == parent }
	cases := []struct {
		name   string
		prefix string
		parent trace.SpanID
	}{
		{"the commit append is a statement of the transaction", "INSERT sync_commits", tx.SpanContext().SpanID()},
		{"the row write is a statement of the transaction", " items", tx.SpanContext().SpanID()},
		{"the ping reads outside the transaction", "SELECT", reqID},
	}
	for _, c := range cases {
		found := false
		for _, sp := range spans {
			if strings.Contains(sp.Name(), c.prefix) && under(sp, c.parent) {
				found = true
			}
		}
		// PostgreSQL appends a commit in one data-modifying CTE.
		if !found && system == "postgresql" && strings.HasPrefix(c.prefix, "INSERT sync_commits") {
			for _, sp := range spans {
				found = found || (strings.HasPrefix(sp.Name(), "WITH") && under(sp, c.parent))
			}
		}
		if !found {
			t.Errorf("%s: no span %q under %v among %v", c.name, c.prefix, c.parent, names(spans))
		}
	}
	for _, sp := range spans {
		if sp.Name() == "request" {
			continue
		}
		sys := ""
		for _, a := range sp.Attributes() {
			if a.Key == "db.system.name" {
				sys = a.Value.AsString()
			}
			if strings.Contains(a.Value.String(), secret) || strings.Contains(a.Value.String(), "p-secret") {
				t.Errorf("span %q carries a bound value in %s", sp.Name(), a.Key)
			}
		}
		if sys != system {
			t.Errorf("span %q: db.system.name %q, want %q", sp.Name(), sys, system)
		}
		if sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %q: kind %v", sp.Name(), sp.SpanKind())
		}
		// EnsureSchema ran without a caller span: its spans are a trace
		// of their own. Every span of the caller's trace hangs below it.
		if sp.SpanContext().TraceID() != req.SpanContext().TraceID() {
			continue
		}
		if _, ok := byID[sp.Parent().SpanID()]; !ok {
			t.Errorf("span %q has a parent outside the recorded spans", sp.Name())
		}
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = sp.Name()
	}
	return out
}

package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerHeader = "00-" + callerTrace + "-" + callerSpan + "-01"
)

func attrs(sp sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, a := range sp.Attributes() {
		m[a.Key] = a.Value.String()
	}
	return m
}

// Every request is a server span named by its route, continuing the
// caller's trace; the handler runs inside it.
func TestRequestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var inHandler trace.SpanContext
	r, err := httpapi.New(httpapi.Options{Mount: "/api", Tracer: tp, Handlers: map[httpapi.Route]http.Handler{
		httpapi.RouteSync: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			inHandler = trace.SpanContextFromContext(req.Context())
			switch req.Header.Get("X-Case") {
			case "refused":
				httpapi.WriteError(w, syncerr.New(syncerr.InvalidRequest))
			case "panic":
				panic("boom")
			default:
				w.WriteHeader(http.StatusOK)
			}
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, path, kase string
		traceparent              bool
		span                     string
		status                   string
		code                     string
		failed                   bool
	}{
		{name: "continues the caller's trace", method: "POST", path: "/api/sync", traceparent: true, span: "POST /sync", status: "200"},
		{name: "a refusal carries its catalog code", method: "POST", path: "/api/sync", kase: "refused", span: "POST /sync", status: "400", code: "sync.invalid_request"},
		{name: "a panic fails the span", method: "POST", path: "/api/sync", kase: "panic", span: "POST /sync", status: "500", code: "sync.internal_error", failed: true},
		{name: "no route: the method alone", method: "GET", path: "/elsewhere", span: "GET", status: "404", code: "sync.not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.Ended())
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(""))
			req.Header.Set(httpapi.RequestIDHeader, "req-"+tc.kase)
			req.Header.Set("X-Case", tc.kase)
			if tc.traceparent {
				req.Header.Set("traceparent", callerHeader)
			}
			r.ServeHTTP(httptest.NewRecorder(), req)
			spans := rec.Ended()[before:]
			if len(spans) != 1 {
				t.Fatalf("%d spans", len(spans))
			}
			sp := spans[0]
			a := attrs(sp)
			if sp.Name() != tc.span || sp.SpanKind() != trace.SpanKindServer {
				t.Fatalf("span %q kind %v", sp.Name(), sp.SpanKind())
			}
			if a["http.response.status_code"] != tc.status || a["syncd.error.code"] != tc.code || a["syncd.request_id"] != "req-"+tc.kase {
				t.Fatalf("attributes %v", a)
			}
			if tc.span != "GET" && a["http.route"] != "/api/sync" {
				t.Fatalf("route %q", a["http.route"])
			}
			if got := sp.Status().Code == codes.Error; got != tc.failed {
				t.Fatalf("status %v", sp.Status())
			}
			if tc.traceparent {
				if sp.SpanContext().TraceID().String() != callerTrace || sp.Parent().SpanID().String() != callerSpan || !sp.Parent().IsRemote() {
					t.Fatalf("trace %s parent %s", sp.SpanContext().TraceID(), sp.Parent().SpanID())
				}
			} else if sp.Parent().IsValid() {
				t.Fatalf("a request without trace context has parent %v", sp.Parent())
			}
			if tc.span != "GET" && !inHandler.Equal(sp.SpanContext()) {
				t.Fatalf("the handler ran in %v, not in the request span", inHandler)
			}
		})
	}
}

// Without a tracer nothing is traced: a caller's trace context is not
// even read.
func TestNoTracerNoSpan(t *testing.T) {
	var inHandler trace.SpanContext
	r, err := httpapi.New(httpapi.Options{Handlers: map[httpapi.Route]http.Handler{
		httpapi.RouteSync: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			inHandler = trace.SpanContextFromContext(req.Context())
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/sync", strings.NewReader("")).WithContext(context.Background())
	req.Header.Set("traceparent", callerHeader)
	r.ServeHTTP(httptest.NewRecorder(), req)
	if inHandler.IsValid() {
		t.Fatalf("span context %v without a tracer", inHandler)
	}
}

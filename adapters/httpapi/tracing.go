package httpapi

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the sync API's spans.
const tracerName = "github.com/syncd-dev/syncd/adapters/httpapi"

// Span attributes of syncd's own.
const (
	attrRequestID = attribute.Key("syncd.request_id")
	attrCode      = attribute.Key("syncd.error.code")
	attrActor     = attribute.Key("syncd.actor_id")
	attrPartition = attribute.Key("syncd.partition")
)

// DefaultPropagator reads and writes W3C trace context and baggage.
func DefaultPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// requestSpan is the server span of one request; a nil one does nothing
// (tracing off).
type requestSpan struct{ span trace.Span }

// startSpan starts the request's server span, continuing the caller's
// trace from its headers. It records the method, the route pattern and
// the request id; never headers, the query string or the body.
func (r *Router) startSpan(req *http.Request, route Route, id string) (*http.Request, *requestSpan) {
	if r.tracer == nil {
		return req, nil
	}
	ctx := r.propagator.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	name := req.Method
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(req.Method), attrRequestID.String(id)}
	if route != "" {
		name = string(route)
		attrs = append(attrs, semconv.HTTPRoute(r.mount+route.Path()))
	}
	ctx, span := r.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return req.WithContext(ctx), &requestSpan{span: span}
}

// end records the answer: status, catalog code, and the authenticated
// actor and partition.
func (s *requestSpan) end(sw *statusWriter, in *requestInfo) {
	if s == nil {
		return
	}
	status := sw.status()
	s.span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if sw.errCode != "" {
		s.span.SetAttributes(attrCode.String(string(sw.errCode)), semconv.ErrorTypeKey.String(string(sw.errCode)))
	}
	if in.actor != "" {
		s.span.SetAttributes(attrActor.String(in.actor), attrPartition.String(in.partition))
	}
	// Server spans fail on 5xx only: a 4xx is the client's error.
	if status >= 500 {
		s.span.SetStatus(codes.Error, string(sw.errCode))
	}
	s.span.End()
}

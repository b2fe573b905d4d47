package realtime

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// tracerName is the instrumentation scope of the socket round spans.
const tracerName = "github.com/syncd-dev/syncd/app/realtime"

// roundSpan is one socket round's span; the zero value does nothing
// (tracing off).
type roundSpan struct{ span trace.Span }

// startRound starts a socket round's span. A round is a trace of its own,
// as an HTTP POST /sync is, linked to the connection's span: a socket may
// live for hours, and its span is exported only when it closes.
func (s *Session) startRound(ctx context.Context) (context.Context, roundSpan) {
	t := s.hub.tracer
	if t == nil {
		return ctx, roundSpan{}
	}
	ctx, sp := t.Start(ctx, "socket round", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(trace.LinkFromContext(ctx)),
		trace.WithAttributes(attribute.String("syncd.actor_id", s.id.ActorID), attribute.String("syncd.partition", s.id.Partition)))
	return ctx, roundSpan{span: sp}
}

// end records the round's refusal, by catalog code only.
func (r roundSpan) end(err *error) {
	if r.span == nil {
		return
	}
	if *err != nil {
		code := string(syncerr.CodeOf(*err))
		r.span.SetAttributes(attribute.String("syncd.error.code", code), attribute.String("error.type", code))
	}
	r.span.End()
}

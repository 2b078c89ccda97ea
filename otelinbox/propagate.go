package otelinbox

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/inbox"
)

// InjectMetadata writes the trace context of ctx into msg.Metadata as W3C
// traceparent and tracestate, for producers that build messages without
// Telemetry's accept middleware (which does this itself). It copies the map
// before writing, so a map shared with other messages is never changed, and
// leaves msg alone when ctx carries no span.
func InjectMetadata(ctx context.Context, msg *inbox.Message) {
	msg.Metadata = inject(propagation.TraceContext{}, ctx, msg.Metadata)
}

// inject returns md with the trace context of ctx written by p: a copy when
// anything is written, md itself otherwise.
func inject(p propagation.TextMapPropagator, ctx context.Context, md map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return md
	}
	out := make(map[string]string, len(md)+2)
	maps.Copy(out, md)
	p.Inject(ctx, propagation.MapCarrier(out))
	return out
}

// extract returns the span context p finds in md (invalid when none).
func extract(p propagation.TextMapPropagator, md map[string]string) trace.SpanContext {
	if len(md) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(p.Extract(context.Background(), propagation.MapCarrier(md)))
}

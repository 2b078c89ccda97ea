package otelinbox

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
)

// HandlerMiddleware returns a handler.Middleware (for
// inbox.WorkerConfig.HandlerMiddleware) that runs every handler call in a
// consumer span "process <consumer>". The span continues the trace context
// of the message's metadata (Config.Trace); the handler's context carries
// the span, so the handler's own spans (database, HTTP) nest under it, and
// EmitMiddleware, so every outbox.Emit with that context is an emit span
// under it whose context the event carries. A handler error sets the span's
// status and error.type and is recorded as an exception event; the
// attempt's outcome follows as a settle span from ObserveWorker.
func (t *Telemetry) HandlerMiddleware() handler.Middleware {
	return func(next handler.Func) handler.Func {
		return func(ctx context.Context, m *handler.Msg) (err error) {
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(t.processAttrs(m)...)}
			ctx, opts = t.joinProducer(ctx, m.Metadata, opts)
			ctx, span := t.tracer.Start(ctx, OpProcess+" "+m.Consumer, opts...)
			ctx = outbox.WithEmitMiddleware(ctx, t.emit)
			defer func() {
				if p := recover(); p != nil {
					span.SetStatus(codes.Error, "handler panicked")
					span.SetAttributes(semconv.ErrorTypeKey.String("panic"))
					span.End()
					panic(p) // the worker turns it into the attempt's error
				}
				if err != nil {
					span.RecordError(err)
					span.SetStatus(codes.Error, err.Error())
					span.SetAttributes(semconv.ErrorTypeKey.String(handlerErrorType(err)))
				}
				span.End()
			}()
			return next(ctx, m)
		}
	}
}

// joinProducer relates a span about to start to the trace context in md:
// as its parent (TraceParent) or as a link from a new root (TraceLink).
func (t *Telemetry) joinProducer(ctx context.Context, md map[string]string, opts []trace.SpanStartOption) (context.Context, []trace.SpanStartOption) {
	producer := extract(t.cfg.Propagator, md)
	if !producer.IsValid() {
		return ctx, append(opts, trace.WithNewRoot())
	}
	if t.cfg.Trace == TraceLink {
		return ctx, append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: producer}))
	}
	return trace.ContextWithRemoteSpanContext(ctx, producer), opts
}

func (t *Telemetry) processAttrs(m *handler.Msg) []attribute.KeyValue {
	kv := consumerAttrs(m.Consumer, m.EventType, m.SchemaVersion)
	kv = append(kv, operation(semconv.MessagingOperationTypeProcess, OpProcess)...)
	kv = append(kv, AttrSource.String(m.Source), AttrReceiptID.String(m.ReceiptID.String()), AttrAttempt.Int(m.Attempt))
	kv = t.scopeAttrs(kv, m.Scope)
	kv = t.messageIDAttr(kv, m.MessageID)
	if t.cfg.RecordPayload {
		p := string(m.Payload)
		if len(p) > t.cfg.MaxPayloadAttribute {
			p = strings.ToValidUTF8(p[:t.cfg.MaxPayloadAttribute], "") // no rune cut in half
		}
		kv = append(kv, AttrPayload.String(p))
	}
	return kv
}

// handlerErrorType classes a handler error for error.type (errorType):
// "handler_error" when nothing more specific is known.
func handlerErrorType(err error) string { return errorType(err, "handler_error") }

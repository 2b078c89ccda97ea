package otelinbox

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
)

// EmitMiddleware returns an outbox.EmitMiddleware that traces every
// outbox.Emit as a producer span "emit <destination>" and writes the span's
// context into the event's metadata (traceparent, tracestate), replacing
// the handled message's: the relay's publish span links to it, and the
// receiving inbox's accept continues its trace.
//
// HandlerMiddleware adds it to every handler's context, so an event a
// handler emits is a child of the handler's span. Elsewhere, emit with
// ctx = outbox.WithEmitMiddleware(ctx, tel.EmitMiddleware()). The span is a
// child of the span in ctx; without one, of the trace context in the
// event's metadata (or the handled message's), which otherwise becomes a
// link.
func (t *Telemetry) EmitMiddleware() outbox.EmitMiddleware {
	return func(next outbox.EmitFunc) outbox.EmitFunc {
		return func(ctx context.Context, tx outbox.Tx, ev outbox.Event) (outbox.ID, error) {
			producer := ev.Metadata
			if m, ok := handler.MsgFromContext(ctx); ok && !extract(t.cfg.Propagator, producer).IsValid() {
				producer = m.Metadata
			}
			ctx, span := t.startProducer(ctx, OpEmit+" "+ev.Destination, producer, t.emitAttrs(ev))
			defer span.End()
			ev.Metadata = inject(t.cfg.Propagator, ctx, ev.Metadata)
			id, err := next(ctx, tx, ev)
			if !id.IsZero() {
				span.SetAttributes(AttrOutboxEventID.String(id.String()))
			}
			if err != nil {
				span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err, "storage")))
				span.SetStatus(codes.Error, emitErrorText(err))
			}
			return id, err
		}
	}
}

func (t *Telemetry) emitAttrs(ev outbox.Event) []attribute.KeyValue {
	kv := []attribute.KeyValue{systemAttr, semconv.MessagingDestinationName(ev.Destination)}
	if ev.Type != "" {
		kv = append(kv, AttrEventType.String(ev.Type), AttrSchemaVersion.Int(ev.SchemaVersion))
	}
	kv = append(kv, operation(semconv.MessagingOperationTypeCreate, OpEmit)...)
	return append(kv, AttrSource.String(ev.Source))
}

// emitErrorText describes a failed emit without a validation error's detail,
// which may quote the payload or metadata.
func emitErrorText(err error) string {
	var ve *inbox.ValidationError
	if errors.As(err, &ve) {
		return "invalid event: " + ve.Field + " breaks rule " + string(ve.Rule)
	}
	return err.Error()
}

package otelinbox

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/inbox"
)

// AcceptMiddleware returns an inbox.AcceptMiddleware (for
// inbox.Config.AcceptMiddleware) that traces and counts every Accept and
// AcceptTx call. The span "accept <consumer>" is a child of the span in the
// caller's context; without one, of the trace context already in the
// message's metadata (a producer's traceparent), which otherwise becomes a
// link. The span's own context then replaces the metadata's trace context,
// so the handler continues the trace from this accept.
func (t *Telemetry) AcceptMiddleware() inbox.AcceptMiddleware {
	return func(next inbox.AcceptFunc) inbox.AcceptFunc {
		return func(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error) {
			attrs := t.messageAttrs(msg)
			ctx, span := t.startProducer(ctx, OpAccept+" "+msg.Consumer, msg.Metadata, attrs)
			defer span.End()
			msg.Metadata = inject(t.cfg.Propagator, ctx, msg.Metadata)
			res, err := next(ctx, msg)
			outcome, errAttrs := acceptOutcome(res.Outcome, err)
			span.SetAttributes(AttrAcceptOutcome.String(outcome))
			span.SetAttributes(errAttrs...)
			if !res.ID.IsZero() {
				span.SetAttributes(AttrReceiptID.String(res.ID.String()))
			}
			if err != nil {
				span.SetStatus(codes.Error, acceptErrorText(outcome, err))
			}
			t.countAccept(ctx, msg, outcome, errAttrs)
			return res, err
		}
	}
}

// AcceptBatchMiddleware returns an inbox.AcceptBatchMiddleware (for
// inbox.Config.AcceptBatchMiddleware) that traces each AcceptBatch and
// AcceptBatchTx call as one span and counts every item's outcome. Each
// message's metadata gets the batch span's context.
func (t *Telemetry) AcceptBatchMiddleware() inbox.AcceptBatchMiddleware {
	return func(next inbox.AcceptBatchFunc) inbox.AcceptBatchFunc {
		return func(ctx context.Context, msgs []inbox.Message) ([]inbox.BatchItem, error) {
			name, attrs := OpAccept, []attribute.KeyValue{systemAttr, semconv.MessagingBatchMessageCount(len(msgs))}
			if c, ok := oneConsumer(msgs); ok {
				name += " " + c
				attrs = append(attrs, semconv.MessagingDestinationName(c))
			}
			attrs = append(attrs, operation(semconv.MessagingOperationTypeSend, OpAccept)...)
			var producer map[string]string
			if len(msgs) > 0 {
				producer = msgs[0].Metadata
			}
			ctx, span := t.startProducer(ctx, name, producer, attrs)
			defer span.End()
			withCtx := make([]inbox.Message, len(msgs))
			for i, m := range msgs {
				m.Metadata = inject(t.cfg.Propagator, ctx, m.Metadata)
				withCtx[i] = m
			}
			items, err := next(ctx, withCtx)
			if err != nil {
				outcome, errAttrs := acceptOutcome("", err)
				span.SetAttributes(errAttrs...)
				span.SetStatus(codes.Error, acceptErrorText(outcome, err))
				for _, m := range msgs {
					t.countAccept(ctx, m, outcome, errAttrs)
				}
				return items, err
			}
			failed := 0
			for i, it := range items {
				outcome, errAttrs := acceptOutcome(it.Outcome, it.Err)
				if it.Err != nil {
					failed++
				}
				if i < len(msgs) {
					t.countAccept(ctx, msgs[i], outcome, errAttrs)
				}
			}
			if failed > 0 {
				span.SetStatus(codes.Error, "some messages were refused (conflict or invalid)")
			}
			return items, err
		}
	}
}

// startProducer starts a producer span under the caller's span, or under the
// trace context found in md, linking md's context when it belongs to
// another trace than the caller's.
func (t *Telemetry) startProducer(ctx context.Context, name string, md map[string]string, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...)}
	if producer := extract(t.cfg.Propagator, md); producer.IsValid() {
		current := trace.SpanContextFromContext(ctx)
		switch {
		case !current.IsValid():
			ctx = trace.ContextWithRemoteSpanContext(ctx, producer)
		case current.TraceID() != producer.TraceID():
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: producer}))
		}
	}
	return t.tracer.Start(ctx, name, opts...)
}

// messageAttrs are an accept span's attributes.
func (t *Telemetry) messageAttrs(msg inbox.Message) []attribute.KeyValue {
	kv := consumerAttrs(msg.Consumer, msg.EventType, msg.SchemaVersion)
	kv = append(kv, operation(semconv.MessagingOperationTypeSend, OpAccept)...)
	kv = append(kv, AttrSource.String(msg.Source))
	kv = t.scopeAttrs(kv, msg.Scope)
	return t.messageIDAttr(kv, msg.MessageID)
}

// countAccept adds one accept outcome to the counter. An invalid message's
// names may be anything a sender made up, so its count carries the rule it
// broke instead of them (bounded cardinality).
func (t *Telemetry) countAccept(ctx context.Context, msg inbox.Message, outcome string, errAttrs []attribute.KeyValue) {
	k := setKey{consumer: msg.Consumer, eventType: msg.EventType, version: msg.SchemaVersion, a: outcome}
	if outcome == OutcomeInvalid {
		k = setKey{a: outcome}
	}
	for _, kv := range errAttrs {
		k.b += kv.Value.String() + "\x00"
	}
	set := t.sets.get(k, func() []attribute.KeyValue {
		var kv []attribute.KeyValue
		if outcome == OutcomeInvalid {
			kv = []attribute.KeyValue{systemAttr}
		} else {
			kv = consumerAttrs(msg.Consumer, msg.EventType, msg.SchemaVersion)
		}
		kv = append(kv, semconv.MessagingOperationName(OpAccept), AttrAcceptOutcome.String(outcome))
		return append(kv, errAttrs...)
	})
	t.accepted.Add(ctx, 1, metric.WithAttributeSet(set))
}

// acceptOutcome names an accept's outcome, with error.type (and for invalid
// messages the field and rule) as attributes.
func acceptOutcome(o inbox.Outcome, err error) (string, []attribute.KeyValue) {
	var ve *inbox.ValidationError
	switch {
	case err == nil && o == inbox.Duplicate:
		return OutcomeDuplicate, nil
	case err == nil:
		return OutcomeAccepted, nil
	case errors.As(err, &ve):
		return OutcomeInvalid, []attribute.KeyValue{semconv.ErrorTypeKey.String(OutcomeInvalid),
			AttrInvalidField.String(ve.Field), AttrInvalidRule.String(string(ve.Rule))}
	case errors.Is(err, inbox.ErrIdentityConflict):
		return OutcomeConflict, []attribute.KeyValue{semconv.ErrorTypeKey.String(OutcomeConflict)}
	}
	return OutcomeError, []attribute.KeyValue{semconv.ErrorTypeKey.String(errorType(err, "storage"))}
}

// acceptErrorText describes a failed accept without the texts that name the
// identity (a conflict's) or quote the payload (a validation error's detail).
func acceptErrorText(outcome string, err error) string {
	var ve *inbox.ValidationError
	switch {
	case errors.As(err, &ve):
		return "invalid message: " + ve.Field + " breaks rule " + string(ve.Rule)
	case outcome == OutcomeConflict:
		return "identity conflict: the message ID is stored with different content"
	}
	return err.Error()
}

func oneConsumer(msgs []inbox.Message) (string, bool) {
	if len(msgs) == 0 {
		return "", false
	}
	for _, m := range msgs[1:] {
		if m.Consumer != msgs[0].Consumer {
			return "", false
		}
	}
	return msgs[0].Consumer, true
}

package otelinbox

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/outbox"
)

// Publisher returns pub with every Publish call traced, for
// outbox.NewRelay: one producer span "publish <destination>" per batch the
// relay sends (plain "publish" for a batch of several destinations), linked
// to the emit span of each message in it (the trace context in its
// metadata). The messages go out unchanged, so the receiving inbox's accept
// continues the emit span's trace; pub's own spans (a broker client's) nest
// under the publish span. When messages fail, the span's status says how
// many and error.type classifies the first failure.
func (t *Telemetry) Publisher(pub outbox.Publisher) outbox.Publisher {
	return tracedPublisher{t: t, pub: pub}
}

type tracedPublisher struct {
	t   *Telemetry
	pub outbox.Publisher
}

func (p tracedPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	t := p.t
	name := OpPublish
	attrs := []attribute.KeyValue{systemAttr, semconv.MessagingBatchMessageCount(len(msgs))}
	if d, ok := oneDestination(msgs); ok {
		name += " " + d
		attrs = append(attrs, semconv.MessagingDestinationName(d))
	}
	attrs = append(attrs, operation(semconv.MessagingOperationTypeSend, OpPublish)...)
	links := make([]trace.Link, 0, len(msgs))
	for _, m := range msgs {
		if sc := extract(t.cfg.Propagator, m.Metadata); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrOutboxEventID.String(m.ID.String())}})
		}
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...), trace.WithLinks(links...))
	defer span.End()
	errs := p.pub.Publish(ctx, msgs)
	failed := 0
	var first error
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed > 0 {
		// Counts, not texts: an error may quote a receiving inbox's identity.
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(first, "publish_error")), AttrPublishFailed.Int(failed))
		span.SetStatus(codes.Error, fmt.Sprintf("%d of %d messages not published", failed, len(msgs)))
	}
	return errs
}

func oneDestination(msgs []outbox.Message) (string, bool) {
	if len(msgs) == 0 {
		return "", false
	}
	for _, m := range msgs[1:] {
		if m.Destination != msgs[0].Destination {
			return "", false
		}
	}
	return msgs[0].Destination, true
}

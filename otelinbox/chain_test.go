package otelinbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/otelinbox"
	"github.com/pginbox/pginbox/outbox"
)

// confirmed is the event the orders handler emits to billing.
func confirmed(orderID string) outbox.Event {
	return outbox.Event{
		Type: "order.confirmed", SchemaVersion: 1, Source: "orders", Destination: "billing.v1",
		Payload: map[string]any{"orderId": orderID},
	}
}

// emittedMetadata returns the metadata of every event in the outbox.
func (r *rig) emittedMetadata(t *testing.T) []map[string]string {
	t.Helper()
	rows, err := r.pool.Query(context.Background(), "SELECT metadata FROM pginbox_outbox ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		var md map[string]string
		if err := rows.Scan(&md); err != nil {
			t.Fatal(err)
		}
		out = append(out, md)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// spanContextOf reads the W3C trace context in md.
func spanContextOf(md map[string]string) trace.SpanContext {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(md))
	return trace.SpanContextFromContext(ctx)
}

// spanByID finds an ended span.
func (r *rig) spanByID(id trace.SpanID) (tracetest.SpanStub, bool) {
	for _, s := range r.spans.GetSpans() {
		if s.SpanContext.SpanID() == id {
			return s, true
		}
	}
	return tracetest.SpanStub{}, false
}

// An event a handler emits carries the handler's trace: its traceparent is
// the handler span or a span under it, never the accept span the handled
// message carried.
func TestEmitFromHandlerCarriesTheHandlersTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{})
	if _, err := r.client(t).Accept(ctx, order("a", 1)); err != nil {
		t.Fatal(err)
	}
	w := r.worker(t, func(ctx context.Context, m *handler.Msg) error {
		_, err := outbox.Emit(ctx, m.Tx, confirmed("a"))
		return err
	}, r.tel.HandlerMiddleware())
	if n, err := w.Drain(ctx); err != nil || n != 1 {
		t.Fatalf("drain: %d, %v", n, err)
	}
	process := r.spansNamed("process " + consumer)[0]
	md := r.emittedMetadata(t)
	if len(md) != 1 {
		t.Fatalf("%d events emitted, want 1", len(md))
	}
	sc := spanContextOf(md[0])
	if sc.TraceID() != process.SpanContext.TraceID() {
		t.Fatalf("the event's trace %s is not the handler's %s", sc.TraceID(), process.SpanContext.TraceID())
	}
	if sc.SpanID() == process.SpanContext.SpanID() {
		return
	}
	s, ok := r.spanByID(sc.SpanID())
	switch {
	case !ok:
		t.Fatalf("the event's traceparent names span %s, which was not recorded", sc.SpanID())
	case s.Parent.SpanID() != process.SpanContext.SpanID():
		t.Fatalf("the event's traceparent is span %q, whose parent is %s, not the handler span %s", s.Name, s.Parent.SpanID(), process.SpanContext.SpanID())
	}
}

// error.type classifies a handler's failure (permanent, a database error's
// SQLSTATE, a timeout, a custom error type), never as the Go type of an
// anonymous error such as *errors.errorString.
func TestHandlerErrorType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{})
	client := r.client(t)
	want := map[string]string{
		"plain":     "handler_error",
		"wrapped":   "handler_error",
		"permanent": "permanent",
		"sql":       "sqlstate_22012",
		"custom":    "*otelinbox_test.quotaError",
		"deadline":  "deadline_exceeded",
	}
	for id := range want {
		if _, err := client.Accept(ctx, order(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	w := r.worker(t, func(ctx context.Context, m *handler.Msg) error {
		switch m.MessageID {
		case "plain":
			return errors.New("downstream busy")
		case "wrapped":
			return errors.Join(errors.New("a"), errors.New("b"))
		case "permanent":
			return handler.Permanent(errors.New("unknown product"))
		case "sql":
			_, err := m.Tx.Exec(ctx, "SELECT 1/0")
			return err
		case "custom":
			return &quotaError{}
		case "deadline":
			return context.DeadlineExceeded
		}
		return nil
	}, r.tel.HandlerMiddleware())
	obs, err := r.tel.ObserveWorker(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	obs.Close()
	for _, name := range []string{"process ", "retry ", "dead "} {
		for _, s := range r.spansNamed(name + consumer) {
			id := messageOf(t, r, s)
			got, _ := attr(s, "error.type")
			if got.AsString() != want[id] {
				t.Errorf("%s span of %s: error.type %q, want %q", s.Name, id, got.AsString(), want[id])
			}
			if strings.Contains(got.AsString(), "errors.") || strings.Contains(got.AsString(), "fmt.") {
				t.Errorf("%s span of %s: error.type %q names an anonymous error type", s.Name, id, got.AsString())
			}
		}
	}
}

type quotaError struct{}

func (*quotaError) Error() string { return "quota exceeded" }

// messageOf returns the message ID of a span's receipt.
func messageOf(t *testing.T, r *rig, s tracetest.SpanStub) string {
	t.Helper()
	v, ok := attr(s, "pginbox.receipt.id")
	if !ok {
		t.Fatalf("span %q has no receipt ID", s.Name)
	}
	rid, err := inboxtype.Parse(v.AsString())
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if err := r.pool.QueryRow(context.Background(), "SELECT message_id FROM pginbox_receipts WHERE id = $1", rid).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Every counter reports 0 from the start, before anything happened, so a
// rate or an alert on it works from the first scrape: the dropped-events
// counter on exactly the series drops are added to, the worker's events for
// each of its consumers and kinds.
func TestCountersReportZeroFromTheStart(t *testing.T) {
	t.Parallel()
	r := newRig(t, otelinbox.Config{})
	w := r.worker(t, func(context.Context, *handler.Msg) error { return nil })
	obs, err := r.tel.ObserveWorker(w)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	rm := r.metrics(t)
	for _, name := range []string{otelinbox.MetricAcceptMessages, otelinbox.MetricWorkerEvents, otelinbox.MetricEventsDropped} {
		ps := points(t, rm, name)
		if len(ps) == 0 {
			t.Errorf("%s: not reported", name)
		}
		for _, p := range ps {
			if p.value != 0 {
				t.Errorf("%s%v = %v before anything happened", name, p.attrs.ToSlice(), p.value)
			}
		}
	}
	if ps := points(t, rm, otelinbox.MetricEventsDropped); len(ps) != 1 || ps[0].attrs.Len() != 1 || !hasAll(ps[0].attrs, []attribute.KeyValue{systemAttr}) {
		t.Errorf("%s: %v, want one point with messaging.system only", otelinbox.MetricEventsDropped, ps)
	}
	for _, k := range []inbox.EventKind{inbox.EventClaimed, inbox.EventCompleted, inbox.EventFailed, inbox.EventDead,
		inbox.EventLeaseLost, inbox.EventRecovered, inbox.EventReleased, inbox.EventAbandoned} {
		want := []attribute.KeyValue{semconv.MessagingDestinationName(consumer), otelinbox.AttrWorkerEvent.String(string(k))}
		found := false
		for _, p := range points(t, rm, otelinbox.MetricWorkerEvents) {
			found = found || hasAll(p.attrs, want)
		}
		if !found {
			t.Errorf("%s: no point for %s %s", otelinbox.MetricWorkerEvents, consumer, k)
		}
	}
}

// The whole chain: service A accepts an order (accept span), its handler
// (process span) emits an event to billing (emit span, whose context the
// event carries), the relay publishes it (publish span, linked to the emit
// span) and service B accepts it from the broker (accept span, a child of
// the emit span): one trace from A's accept to B's, and the relay's own.
func TestTraceChainThroughTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{})
	if _, err := r.client(t).Accept(ctx, order("a", 1)); err != nil {
		t.Fatal(err)
	}
	w := r.worker(t, func(ctx context.Context, m *handler.Msg) error {
		_, err := outbox.Emit(ctx, m.Tx, confirmed("a"))
		return err
	}, r.tel.HandlerMiddleware())
	if n, err := w.Drain(ctx); err != nil || n != 1 {
		t.Fatalf("drain: %d, %v", n, err)
	}

	var broker []outbox.Message
	relay, err := outbox.NewRelay(r.pool, r.tel.Publisher(outbox.PublishFunc(func(_ context.Context, m outbox.Message) error {
		broker = append(broker, m)
		return nil
	})), outbox.RelayConfig{PollOnly: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Drain(ctx); err != nil || n != 1 || len(broker) != 1 {
		t.Fatalf("relay drain: %d, %v; %d published", n, err, len(broker))
	}

	// Service B's transport accepts what the broker delivers, with no span
	// of its own.
	b, err := inbox.NewClient(r.pool, inbox.Config{AcceptMiddleware: []inbox.AcceptMiddleware{r.tel.AcceptMiddleware()}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := broker[0]
	if _, err := b.Accept(ctx, inbox.Message{
		Identity:  inbox.Identity{Scope: m.Scope, Source: m.Source, Consumer: m.Destination, MessageID: m.ID.String()},
		EventType: m.EventType, SchemaVersion: m.SchemaVersion, Payload: m.Payload, Metadata: m.Metadata,
	}); err != nil {
		t.Fatal(err)
	}

	acceptA := r.spansNamed("accept " + consumer)[0]
	process := r.spansNamed("process " + consumer)[0]
	emits := r.spansNamed("emit billing.v1")
	publishes := r.spansNamed("publish billing.v1")
	acceptB := r.spansNamed("accept billing.v1")
	if len(emits) != 1 || len(publishes) != 1 || len(acceptB) != 1 {
		t.Fatalf("%d emit, %d publish and %d accept billing.v1 spans, want one each", len(emits), len(publishes), len(acceptB))
	}
	emitSpan, publish := emits[0], publishes[0]
	trace1 := acceptA.SpanContext.TraceID()
	for _, c := range []struct {
		name          string
		span          tracetest.SpanStub
		parent        trace.SpanContext
		kind          trace.SpanKind
		operationType string
	}{
		{"process", process, acceptA.SpanContext, trace.SpanKindConsumer, "process"},
		{"emit", emitSpan, process.SpanContext, trace.SpanKindProducer, "create"},
		{"accept in service B", acceptB[0], emitSpan.SpanContext, trace.SpanKindProducer, "send"},
	} {
		if c.span.Parent.SpanID() != c.parent.SpanID() || c.span.SpanContext.TraceID() != trace1 {
			t.Errorf("%s span: parent %s in trace %s, want %s in trace %s", c.name, c.span.Parent.SpanID(), c.span.SpanContext.TraceID(), c.parent.SpanID(), trace1)
		}
		if c.span.SpanKind != c.kind {
			t.Errorf("%s span kind %v, want %v", c.name, c.span.SpanKind, c.kind)
		}
		if v, _ := attr(c.span, semconv.MessagingOperationTypeKey); v.AsString() != c.operationType {
			t.Errorf("%s span: messaging.operation.type %q, want %q", c.name, v.AsString(), c.operationType)
		}
	}
	wantAttrs(t, emitSpan, systemAttr, semconv.MessagingDestinationName("billing.v1"), otelinbox.AttrEventType.String("order.confirmed"),
		otelinbox.AttrSource.String("orders"), otelinbox.AttrOutboxEventID.String(m.ID.String()))

	// The relay's span starts a trace of its own, linked to the emit span.
	if publish.Parent.IsValid() || publish.SpanContext.TraceID() == trace1 || publish.SpanKind != trace.SpanKindProducer {
		t.Errorf("publish span: parent %v, trace %s, kind %v; want a producer span starting its own trace", publish.Parent, publish.SpanContext.TraceID(), publish.SpanKind)
	}
	if len(publish.Links) != 1 || publish.Links[0].SpanContext.SpanID() != emitSpan.SpanContext.SpanID() {
		t.Errorf("publish span links %v, want the emit span", publish.Links)
	}
	wantAttrs(t, publish, systemAttr, semconv.MessagingDestinationName("billing.v1"), semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName("publish"), semconv.MessagingBatchMessageCount(1))

	// The event carries the emit span's context, and the handled message's
	// causation as before.
	if sc := spanContextOf(m.Metadata); sc.SpanID() != emitSpan.SpanContext.SpanID() {
		t.Errorf("published traceparent %q, want the emit span's", m.Metadata["traceparent"])
	}
	if m.Metadata[outbox.MetadataCausationID] != "a" {
		t.Errorf("causation_id %q, want the handled message's ID", m.Metadata[outbox.MetadataCausationID])
	}
	if leaks := r.leaks(t, secretTenant, secretPayload); len(leaks) > 0 {
		t.Errorf("tenant ID or payload in telemetry:\n%v", leaks)
	}
}

// A failed emit and a partly failed publish say so, classified, without
// the errors' texts (which may quote the payload or a receiver's identity).
func TestEmitAndPublishFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{})

	// Outside a handler, the middleware comes with the context.
	rctx, request := r.tp.Tracer("http").Start(ctx, "POST /orders")
	ectx := outbox.WithEmitMiddleware(rctx, r.tel.EmitMiddleware())
	bad := confirmed(secretPayload)
	bad.Type = ""
	if _, err := outbox.Emit(ectx, r.pool, bad); !errors.Is(err, inbox.ErrInvalid) {
		t.Fatalf("emit without a type: %v, want ErrInvalid", err)
	}
	id, err := outbox.Emit(ectx, r.pool, confirmed("b"))
	if err != nil {
		t.Fatal(err)
	}
	dup := confirmed("b")
	dup.ID = id
	if _, err := outbox.Emit(ectx, r.pool, dup); !errors.Is(err, outbox.ErrDuplicateEvent) {
		t.Fatalf("emit again: %v, want ErrDuplicateEvent", err)
	}
	request.End()
	spans := r.spansNamed("emit billing.v1")
	if len(spans) != 3 {
		t.Fatalf("%d emit spans, want 3", len(spans))
	}
	for i, want := range []struct{ errorType, status string }{
		{"invalid", "invalid event: event_type breaks rule required"},
		{"", ""},
		{"duplicate_event", ""},
	} {
		s := spans[i]
		if s.Parent.SpanID() != request.SpanContext().SpanID() {
			t.Errorf("emit span %d: parent %s, want the request span", i, s.Parent.SpanID())
		}
		if got, _ := attr(s, "error.type"); got.AsString() != want.errorType {
			t.Errorf("emit span %d: error.type %q, want %q", i, got.AsString(), want.errorType)
		}
		if (s.Status.Code == codes.Error) != (want.errorType != "") || (want.status != "" && s.Status.Description != want.status) {
			t.Errorf("emit span %d: status %v", i, s.Status)
		}
	}

	var msgs []outbox.Message
	for i := range 3 {
		md := map[string]string{}
		propagation.TraceContext{}.Inject(rctx, propagation.MapCarrier(md))
		msgs = append(msgs, outbox.Message{ID: inboxtype.New(), Destination: []string{"a", "b", "b"}[i], Metadata: md})
	}
	pub := r.tel.Publisher(outbox.PublishFunc(func(_ context.Context, m outbox.Message) error {
		switch m.Destination {
		case "b":
			return handler.Permanent(fmt.Errorf("receiver refused %s: %s", m.ID, secretTenant))
		}
		return nil
	}))
	errs := pub.Publish(ctx, msgs)
	if len(errs) != 3 || errs[0] != nil || errs[1] == nil || errs[2] == nil {
		t.Fatalf("publish errors %v, want the inner publisher's", errs)
	}
	p := r.spansNamed("publish")
	if len(p) != 1 {
		t.Fatalf("%d publish spans for a batch of two destinations, want one named \"publish\"", len(p))
	}
	if p[0].Status.Code != codes.Error || p[0].Status.Description != "2 of 3 messages not published" {
		t.Errorf("publish span status %v", p[0].Status)
	}
	wantAttrs(t, p[0], semconv.ErrorTypeKey.String("permanent"), otelinbox.AttrPublishFailed.Int(2), semconv.MessagingBatchMessageCount(3))
	if len(p[0].Links) != 3 {
		t.Errorf("%d links, want one per message", len(p[0].Links))
	}
	if leaks := r.leaks(t, secretTenant, secretPayload); len(leaks) > 0 {
		t.Errorf("tenant ID or payload in telemetry:\n%v", leaks)
	}
}

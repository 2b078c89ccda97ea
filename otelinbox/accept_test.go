package otelinbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/otelinbox"
)

// An accept inside a traced request is a child of the request's span; a
// producer's trace context from another trace becomes a link; the stored
// metadata carries the accept span, so the handler continues from it.
func TestAcceptUnderCallerSpan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{})
	client := r.client(t)
	pctx, producer := r.tp.Tracer("producer").Start(ctx, "produce")
	producer.End()
	rctx, request := r.tp.Tracer("http").Start(ctx, "POST /webhook")
	msg := order("a", 1)
	otelinbox.InjectMetadata(pctx, &msg)
	res, err := client.Accept(rctx, msg)
	request.End()
	if err != nil {
		t.Fatal(err)
	}
	s := r.spansNamed("accept " + consumer)[0]
	if s.Parent.SpanID() != request.SpanContext().SpanID() {
		t.Errorf("accept span's parent is not the request span")
	}
	if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != producer.SpanContext().SpanID() {
		t.Errorf("accept span links %v, want the producer's span", s.Links)
	}
	stored := r.metadata(t, res.ID)
	want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
	if stored["traceparent"] != want {
		t.Errorf("stored traceparent %q, want the accept span's %q", stored["traceparent"], want)
	}
	if msg.Metadata["traceparent"] == want {
		t.Error("the caller's message was changed")
	}
}

// A batch is one span; each item is counted with its own outcome; AcceptTx
// and AcceptBatchTx go through the same middleware.
func TestAcceptBatchAndTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{})
	client := r.client(t)
	if _, err := client.Accept(ctx, order("a", 1)); err != nil {
		t.Fatal(err)
	}
	conflict := order("a", 2)
	invalid := order("c", 3)
	invalid.EventType = ""
	items, err := client.AcceptBatch(ctx, []inbox.Message{order("a", 1), order("b", 2), conflict, invalid})
	if err != nil || len(items) != 4 {
		t.Fatalf("batch: %v %v", items, err)
	}
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := client.AcceptTx(ctx, tx, order("d", 4)); err != nil {
			return err
		}
		_, err := client.AcceptBatchTx(ctx, tx, []inbox.Message{order("e", 5)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	batches := 0
	for _, s := range r.spansNamed("accept " + consumer) {
		v, ok := attr(s, semconv.MessagingBatchMessageCountKey)
		if !ok {
			continue
		}
		batches++
		if v.AsInt64() == 4 && s.Status.Code != codes.Error {
			t.Errorf("batch with refused items: status %v, want Error", s.Status)
		}
	}
	if batches != 2 || len(r.spansNamed("accept "+consumer)) != 4 {
		t.Errorf("%d batch spans of %d accept spans, want 2 of 4", batches, len(r.spansNamed("accept "+consumer)))
	}
	rm := r.metrics(t)
	outcome := func(o string) attribute.KeyValue { return otelinbox.AttrAcceptOutcome.String(o) }
	wantSum(t, rm, otelinbox.MetricAcceptMessages, 4, outcome("accepted")) // a, b, d, e
	wantSum(t, rm, otelinbox.MetricAcceptMessages, 1, outcome("duplicate"))
	wantSum(t, rm, otelinbox.MetricAcceptMessages, 1, outcome("conflict"))
	wantSum(t, rm, otelinbox.MetricAcceptMessages, 1, outcome("invalid"), otelinbox.AttrInvalidField.String("event_type"))

	// Every batch item carries its batch span's context.
	b := inboxtest.RequireReceipt(t, r.pool, order("b", 2).Identity)
	if r.metadata(t, b.ID)["traceparent"] == "" {
		t.Error("batch item stored without traceparent")
	}
}

// A failing store is counted as "error", classified (here: the schema is
// missing), and the span says why.
func TestAcceptStorageError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{})
	client := r.client(t)
	if _, err := r.pool.Exec(ctx, "DROP TABLE pginbox_audit, pginbox_receipts, pginbox_work CASCADE"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Accept(ctx, order("a", 1)); inbox.ActionFor(err) != inbox.ActionRetry {
		t.Fatalf("accept without a table: %v, want a retryable error", err)
	}
	wantSum(t, r.metrics(t), otelinbox.MetricAcceptMessages, 1, otelinbox.AttrAcceptOutcome.String("error"), semconv.ErrorTypeKey.String("not_migrated"))
	s := r.spansNamed("accept " + consumer)[0]
	if s.Status.Code != codes.Error || s.Status.Description == "" {
		t.Errorf("span status %v, want the storage error", s.Status)
	}
	if s.SpanKind != trace.SpanKindProducer {
		t.Errorf("kind %v", s.SpanKind)
	}
}

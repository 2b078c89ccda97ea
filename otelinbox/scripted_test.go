package otelinbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/otelinbox"
)

// The scripted run: a producer in another process sends 10 orders (its
// traceparent in their metadata), 3 are redelivered, one redelivery
// conflicts, one message is invalid; two handlers fail once then complete,
// one goes DEAD. Spans, their parents, attributes, counters and gauges are
// exactly what that run implies, and neither the tenant ID nor the payload
// appears anywhere.
func TestScriptedRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{})
	client := r.client(t)
	backlog, err := r.tel.ObserveBacklog(r.pool)
	if err != nil {
		t.Fatal(err)
	}
	defer backlog.Close()
	clock := time.Now()
	otelinbox.SetBacklogClock(backlog, func() time.Time { return clock })

	// The producer's span, as a remote process would send it.
	pctx, producer := r.tp.Tracer("producer").Start(ctx, "produce orders")
	producer.End()
	var ids []string
	for i := range 10 {
		id := fmt.Sprintf("evt-%d", i)
		switch i {
		case 7, 8:
			id = fmt.Sprintf("flaky-%d", i)
		case 9:
			id = "poison-9"
		}
		ids = append(ids, id)
		msg := order(id, i)
		otelinbox.InjectMetadata(pctx, &msg)
		res, err := client.Accept(ctx, msg) // the transport's context: no span
		if err != nil || res.Outcome != inbox.Accepted {
			t.Fatalf("accept %s: %v %v", id, res.Outcome, err)
		}
	}
	for _, id := range ids[:3] {
		if res, err := client.Accept(ctx, order(id, int(id[len(id)-1]-'0'))); err != nil || res.Outcome != inbox.Duplicate {
			t.Fatalf("redeliver %s: %v %v", id, res.Outcome, err)
		}
	}
	if _, err := client.Accept(ctx, order(ids[0], 99)); !errors.Is(err, inbox.ErrIdentityConflict) {
		t.Fatalf("changed redelivery: %v, want a conflict", err)
	}
	bad := order("bad-1", 0)
	bad.Payload = []byte(`{"note": "` + secretPayload + `", "n": 1, "n": 2}`) // duplicate key
	if _, err := client.Accept(ctx, bad); !errors.Is(err, inbox.ErrInvalid) {
		t.Fatalf("invalid message: %v, want ErrInvalid", err)
	}

	// The backlog before any handler ran: 10 due.
	rm := r.metrics(t)
	dest := semconv.MessagingDestinationName(consumer)
	wantGauge(t, rm, otelinbox.MetricBacklogDue, 10, dest)
	wantGauge(t, rm, otelinbox.MetricBacklogReceipts, 10, dest, otelinbox.AttrStatus.String("PENDING"))
	wantGauge(t, rm, otelinbox.MetricBacklogReceipts, 0, dest, otelinbox.AttrStatus.String("DEAD"))
	if age, _ := total(t, rm, otelinbox.MetricBacklogAge, dest); age < 0 {
		t.Errorf("oldest due age %v, want >= 0", age)
	}

	var mu sync.Mutex
	failedOnce := map[string]bool{}
	w := r.worker(t, func(ctx context.Context, m *handler.Msg) error {
		if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
			return handler.Permanent(errors.New("the handler's context has no span"))
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case m.MessageID == "poison-9":
			return handler.Permanent(errors.New("unknown product"))
		case m.MessageID[:5] == "flaky" && !failedOnce[m.MessageID]:
			failedOnce[m.MessageID] = true
			return errors.New("downstream busy")
		}
		return nil
	}, r.tel.HandlerMiddleware())
	obs, err := r.tel.ObserveWorker(w)
	if err != nil {
		t.Fatal(err)
	}
	n, err := w.Drain(ctx)
	if err != nil || n != 12 {
		t.Fatalf("drain: %d handled, %v; want 12 (10 + 2 retries)", n, err)
	}
	obs.Close() // records what is buffered

	// Spans: names and counts.
	for name, want := range map[string]int{
		"accept " + consumer:   15,
		"process " + consumer:  12,
		"complete " + consumer: 9,
		"retry " + consumer:    2,
		"dead " + consumer:     1,
	} {
		if got := len(r.spansNamed(name)); got != want {
			t.Errorf("%d spans %q, want %d", got, name, want)
		}
	}
	if got := len(r.spans.GetSpans()); got != 1+15+12+12 {
		t.Errorf("%d spans in all, want 40", got)
	}

	// Parents: producer -> accept -> process and settle, one trace.
	pc := producer.SpanContext()
	acceptOf := map[string]trace.SpanContext{} // receipt ID -> accept span of its first delivery
	outcomes := map[string]int{}
	for _, s := range r.spansNamed("accept " + consumer) {
		o, _ := attr(s, otelinbox.AttrAcceptOutcome)
		outcomes[o.AsString()]++
		if s.SpanKind != trace.SpanKindProducer {
			t.Errorf("accept span kind %v", s.SpanKind)
		}
		if o.AsString() != otelinbox.OutcomeAccepted {
			continue
		}
		if s.Parent.SpanID() != pc.SpanID() || s.SpanContext.TraceID() != pc.TraceID() {
			t.Errorf("accept span's parent %v, want the producer's span %v", s.Parent.SpanID(), pc.SpanID())
		}
		id, _ := attr(s, otelinbox.AttrReceiptID)
		acceptOf[id.AsString()] = s.SpanContext
		wantAttrs(t, s, systemAttr, dest, otelinbox.AttrEventType.String(eventType), otelinbox.AttrSchemaVersion.Int(1),
			otelinbox.AttrScopeKind.String("tenant"), otelinbox.AttrSource.String("checkout"),
			semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("accept"))
	}
	if want := map[string]int{"accepted": 10, "duplicate": 3, "conflict": 1, "invalid": 1}; fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Errorf("accept span outcomes %v, want %v", outcomes, want)
	}
	attempts := map[string]int{}
	for _, s := range r.spansNamed("process " + consumer) {
		id, _ := attr(s, otelinbox.AttrReceiptID)
		parent, ok := acceptOf[id.AsString()]
		if !ok {
			t.Fatalf("process span for receipt %s, which no accept span created", id.AsString())
		}
		if s.Parent.SpanID() != parent.SpanID() || s.SpanContext.TraceID() != pc.TraceID() {
			t.Errorf("process span's parent %v, want its accept span %v", s.Parent.SpanID(), parent.SpanID())
		}
		if s.SpanKind != trace.SpanKindConsumer {
			t.Errorf("process span kind %v", s.SpanKind)
		}
		a, _ := attr(s, otelinbox.AttrAttempt)
		attempts[fmt.Sprint(a.AsInt64())]++
		wantAttrs(t, s, systemAttr, dest, otelinbox.AttrEventType.String(eventType),
			semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName("process"))
		if s.Status.Code == codes.Error && len(s.Events) == 0 {
			t.Errorf("failed process span without an exception event")
		}
	}
	if fmt.Sprint(attempts) != "map[1:10 2:2]" {
		t.Errorf("process spans by attempt %v, want 10 first attempts and 2 second", attempts)
	}
	for _, name := range []string{"complete ", "retry ", "dead "} {
		for _, s := range r.spansNamed(name + consumer) {
			id, _ := attr(s, otelinbox.AttrReceiptID)
			if s.Parent.SpanID() != acceptOf[id.AsString()].SpanID() {
				t.Errorf("%s span's parent is not its accept span", s.Name)
			}
			wantAttrs(t, s, semconv.MessagingOperationTypeSettle)
		}
	}
	dead := r.spansNamed("dead " + consumer)[0]
	if dead.Status.Code != codes.Error || dead.Status.Description != "unknown product" {
		t.Errorf("dead span status %v", dead.Status)
	}
	if _, ok := attr(r.spansNamed("retry " + consumer)[0], otelinbox.AttrRetryAt); !ok {
		t.Error("retry span without pginbox.retry_at")
	}

	// Counters.
	rm = r.metrics(t)
	outcome := func(o string) attribute.KeyValue { return otelinbox.AttrAcceptOutcome.String(o) }
	wantSum(t, rm, otelinbox.MetricAcceptMessages, 10, dest, otelinbox.AttrEventType.String(eventType), outcome("accepted"))
	wantSum(t, rm, otelinbox.MetricAcceptMessages, 3, dest, outcome("duplicate"))
	wantSum(t, rm, otelinbox.MetricAcceptMessages, 1, dest, outcome("conflict"), semconv.ErrorTypeKey.String("conflict"))
	wantSum(t, rm, otelinbox.MetricAcceptMessages, 1, outcome("invalid"), otelinbox.AttrInvalidRule.String(string(inbox.RuleDuplicateKey)))
	wantSum(t, rm, otelinbox.MetricAcceptMessages, 0, outcome("error"))
	event := func(k inbox.EventKind) attribute.KeyValue { return otelinbox.AttrWorkerEvent.String(string(k)) }
	wantSum(t, rm, otelinbox.MetricWorkerEvents, 12, dest, event(inbox.EventClaimed))
	wantSum(t, rm, otelinbox.MetricWorkerEvents, 9, dest, event(inbox.EventCompleted))
	wantSum(t, rm, otelinbox.MetricWorkerEvents, 2, dest, event(inbox.EventFailed))
	wantSum(t, rm, otelinbox.MetricWorkerEvents, 1, dest, event(inbox.EventDead))
	for _, k := range []inbox.EventKind{inbox.EventLeaseLost, inbox.EventRecovered, inbox.EventReleased, inbox.EventAbandoned} {
		wantSum(t, rm, otelinbox.MetricWorkerEvents, 0, event(k))
	}
	wantSum(t, rm, otelinbox.MetricEventsDropped, 0)
	if n, _ := total(t, rm, otelinbox.MetricProcessDuration, dest); n != 12 {
		t.Errorf("%s: %v handler calls, want 12", otelinbox.MetricProcessDuration, n)
	}
	if n, sum := total(t, rm, otelinbox.MetricAttempts, dest, event(inbox.EventCompleted)); n != 9 || sum != 11 {
		t.Errorf("attempts of completed receipts: %v receipts, %v attempts; want 9 and 11", n, sum)
	}
	if n, sum := total(t, rm, otelinbox.MetricAttempts, dest, event(inbox.EventDead)); n != 1 || sum != 1 {
		t.Errorf("attempts of DEAD receipts: %v receipts, %v attempts; want 1 and 1", n, sum)
	}

	// Gauges: cached within the interval, fresh after it.
	wantGauge(t, rm, otelinbox.MetricBacklogDue, 10, dest)
	clock = clock.Add(otelinbox.DefaultBacklogInterval)
	rm = r.metrics(t)
	wantGauge(t, rm, otelinbox.MetricBacklogDue, 0, dest)
	wantGauge(t, rm, otelinbox.MetricBacklogAge, 0, dest)
	for status, want := range map[string]float64{"PENDING": 0, "PROCESSING": 0, "RETRYABLE": 0, "DEAD": 1} {
		wantGauge(t, rm, otelinbox.MetricBacklogReceipts, want, dest, otelinbox.AttrStatus.String(status))
	}

	if leaks := r.leaks(t, secretTenant, secretPayload, "evt-", "flaky-", "poison-"); len(leaks) > 0 {
		t.Errorf("tenant ID, message ID or payload in telemetry:\n%v", leaks)
	}
}

var systemAttr = semconv.MessagingSystemKey.String("pginbox")

func wantAttrs(t *testing.T, s tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	for _, kv := range want {
		if v, ok := attr(s, kv.Key); !ok || v != kv.Value {
			t.Errorf("span %q: %s = %v, want %v", s.Name, kv.Key, v.String(), kv.Value.String())
		}
	}
}

func wantSum(t *testing.T, rm metricdata.ResourceMetrics, name string, want float64, attrs ...attribute.KeyValue) {
	t.Helper()
	if got, _ := total(t, rm, name, attrs...); got != want {
		t.Errorf("%s%v = %v, want %v", name, attrs, got, want)
	}
}

func wantGauge(t *testing.T, rm metricdata.ResourceMetrics, name string, want float64, attrs ...attribute.KeyValue) {
	t.Helper()
	ps := 0
	for _, p := range points(t, rm, name) {
		if hasAll(p.attrs, attrs) {
			ps++
			if p.value != want {
				t.Errorf("%s%v = %v, want %v", name, attrs, p.value, want)
			}
		}
	}
	if ps != 1 {
		t.Errorf("%s%v: %d points, want 1", name, attrs, ps)
	}
}

package otelinbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/inbox"
)

// WorkerObserver turns one worker's event stream into metrics and settle
// spans. The worker never waits for it: when it falls behind by more than
// Config.EventBuffer events, new ones are dropped and counted in
// pginbox.worker.events.dropped.
type WorkerObserver struct {
	t        *Telemetry
	sub      *inbox.Subscription
	done     chan struct{}
	once     sync.Once
	reported uint64 // drops added to the counter so far; the loop's own
}

// ObserveWorker subscribes to w's events until Close. Per event it adds to
// pginbox.worker.events (by consumer and kind, every one reported from 0 at
// once, as is pginbox.worker.events.dropped); per handler call it records messaging.process.duration;
// per completed or DEAD receipt it records pginbox.worker.attempts; and for
// each completed, failed or DEAD attempt it ends a settle span ("complete",
// "retry" or "dead" followed by the consumer) in the message's trace.
func (t *Telemetry) ObserveWorker(w *inbox.Worker) (*WorkerObserver, error) {
	if w == nil {
		return nil, errors.New("otelinbox: ObserveWorker: worker is nil: pass the *inbox.Worker from inbox.NewWorker")
	}
	o := &WorkerObserver{t: t, sub: w.Subscribe(inbox.SubscribeConfig{Buffer: t.cfg.EventBuffer}), done: make(chan struct{})}
	// Every series these counters will have, at 0 from the start.
	ctx := context.Background()
	for _, c := range w.Consumers() {
		for _, k := range workerEventKinds {
			t.workerEvents.Add(ctx, 0, metric.WithAttributeSet(t.workerEventSet(c, k)))
		}
	}
	t.dropped.Add(ctx, 0, metric.WithAttributes(systemAttr))
	go o.loop()
	return o, nil
}

// workerEventKinds are every inbox.EventKind.
var workerEventKinds = []inbox.EventKind{
	inbox.EventClaimed, inbox.EventCompleted, inbox.EventFailed, inbox.EventDead,
	inbox.EventLeaseLost, inbox.EventRecovered, inbox.EventReleased, inbox.EventAbandoned,
}

// workerEventSet is the attribute set of pginbox.worker.events: the consumer
// and the kind only, so the series are known before any event.
func (t *Telemetry) workerEventSet(consumer string, k inbox.EventKind) attribute.Set {
	return t.sets.get(setKey{consumer: consumer, a: string(k), b: "worker event"}, func() []attribute.KeyValue {
		return append(consumerAttrs(consumer, "", 0), AttrWorkerEvent.String(string(k)))
	})
}

// Dropped returns how many events this observer lost because it fell behind.
func (o *WorkerObserver) Dropped() uint64 { return o.sub.Dropped() }

// Close ends the subscription after recording the events already received.
func (o *WorkerObserver) Close() {
	o.once.Do(func() {
		o.sub.Close()
		<-o.done
	})
}

// loop records events until Close. Drops are added to their counter as the
// loop catches up (a blocked loop cannot record anything) and at the end.
func (o *WorkerObserver) loop() {
	defer close(o.done)
	defer o.countDrops()
	for e := range o.sub.C() {
		o.t.record(e)
		o.countDrops()
	}
}

func (o *WorkerObserver) countDrops() {
	if n := o.sub.Dropped(); n > o.reported {
		o.t.dropped.Add(context.Background(), int64(n-o.reported), metric.WithAttributes(systemAttr))
		o.reported = n
	}
}

// record turns one worker event into metrics and, for an attempt's outcome,
// a settle span.
func (t *Telemetry) record(e inbox.Event) {
	ctx := context.Background()
	kv := consumerAttrs(e.Consumer, e.EventType, e.SchemaVersion)
	t.workerEvents.Add(ctx, 1, metric.WithAttributeSet(t.workerEventSet(e.Consumer, e.Kind)))
	var op string
	switch e.Kind {
	case inbox.EventCompleted:
		op = OpComplete
	case inbox.EventFailed:
		op = OpRetry
	case inbox.EventDead:
		op = OpDead
	default:
		return
	}
	if e.Duration > 0 {
		d := kv
		if e.Err != nil {
			d = append(d, semconv.ErrorTypeKey.String(handlerErrorType(e.Err)))
		}
		t.processTime.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(append(d, semconv.MessagingOperationName(OpProcess))...))
	}
	if e.Kind != inbox.EventFailed {
		t.attempts.Record(ctx, int64(e.Attempt), metric.WithAttributes(append(kv, AttrWorkerEvent.String(string(e.Kind)))...))
	}
	t.settleSpan(e, op)
}

// settleSpan records an attempt's outcome as a span at the time the worker
// recorded it, in the trace of the message's metadata.
func (t *Telemetry) settleSpan(e inbox.Event, op string) {
	kv := consumerAttrs(e.Consumer, e.EventType, e.SchemaVersion)
	kv = append(kv, operation(semconv.MessagingOperationTypeSettle, op)...)
	kv = append(kv, AttrReceiptID.String(e.ReceiptID.String()), AttrAttempt.Int(e.Attempt))
	kv = t.scopeAttrs(kv, e.Scope)
	if !e.RetryAt.IsZero() {
		kv = append(kv, AttrRetryAt.String(e.RetryAt.UTC().Format(time.RFC3339Nano)))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(e.At), trace.WithAttributes(kv...)}
	ctx, opts := t.joinProducer(context.Background(), e.Metadata, opts)
	_, span := t.tracer.Start(ctx, op+" "+e.Consumer, opts...)
	if e.Err != nil {
		span.RecordError(e.Err, trace.WithTimestamp(e.At))
		span.SetAttributes(semconv.ErrorTypeKey.String(handlerErrorType(e.Err)))
		if e.Kind == inbox.EventDead {
			span.SetStatus(codes.Error, e.Err.Error())
		}
	}
	span.End(trace.WithTimestamp(e.At))
}

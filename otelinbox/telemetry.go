package otelinbox

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pginbox/pginbox/outbox"
)

// ScopeName is the instrumentation scope of otelinbox's tracer and meter.
const ScopeName = "github.com/pginbox/pginbox/otelinbox"

// Metric names. The messaging.* ones follow the OpenTelemetry semantic
// conventions; the rest are pginbox's.
const (
	MetricAcceptMessages  = "messaging.client.sent.messages" // counter, by AttrAcceptOutcome
	MetricProcessDuration = "messaging.process.duration"     // histogram, seconds per handler call
	MetricWorkerEvents    = "pginbox.worker.events"          // counter, by consumer and AttrWorkerEvent
	MetricAttempts        = "pginbox.worker.attempts"        // histogram, attempts per completed or DEAD receipt
	MetricEventsDropped   = "pginbox.worker.events.dropped"  // counter, events ObserveWorker lost
	MetricBacklogDue      = "pginbox.backlog.due"            // gauge, due receipts per consumer
	MetricBacklogAge      = "pginbox.backlog.oldest_due_age" // gauge, seconds
	MetricBacklogReceipts = "pginbox.backlog.receipts"       // gauge, by AttrStatus (not COMPLETED)
)

// Telemetry creates pginbox's spans and metrics. One Telemetry serves any
// number of clients, workers and pools; it is safe for concurrent use.
type Telemetry struct {
	cfg    Config
	tracer trace.Tracer
	meter  metric.Meter

	accepted      metric.Int64Counter
	processTime   metric.Float64Histogram
	workerEvents  metric.Int64Counter
	attempts      metric.Int64Histogram
	dropped       metric.Int64Counter
	backlogDue    metric.Int64ObservableGauge
	backlogAge    metric.Float64ObservableGauge
	backlogCounts metric.Int64ObservableGauge

	sets attrSets
	emit outbox.EmitMiddleware // what HandlerMiddleware adds to a handler's context
}

// New returns a Telemetry for cfg, or an *inbox.ConfigError naming the field
// it refuses.
func New(cfg Config) (*Telemetry, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Telemetry{
		cfg:    cfg,
		tracer: cfg.TracerProvider.Tracer(ScopeName),
		meter:  cfg.MeterProvider.Meter(ScopeName),
	}
	if err := t.instruments(); err != nil {
		return nil, err
	}
	t.emit = t.EmitMiddleware()
	// Counters report 0 from the start, so a rate or an alert works from the
	// first collection. The worker's counters get theirs in ObserveWorker,
	// which knows its consumers.
	t.accepted.Add(context.Background(), 0, metric.WithAttributes(systemAttr, semconv.MessagingOperationName(OpAccept)))
	return t, nil
}

func (t *Telemetry) instruments() (err error) {
	m := t.meter
	// Collect the first error; later calls still return usable no-op
	// instruments.
	check := func(e error) {
		if err == nil {
			err = e
		}
	}
	var e error
	t.accepted, e = m.Int64Counter(MetricAcceptMessages, metric.WithUnit("{message}"),
		metric.WithDescription("Messages given to Accept, AcceptTx or the batch calls, by outcome"))
	check(e)
	t.processTime, e = m.Float64Histogram(MetricProcessDuration, metric.WithUnit("s"),
		metric.WithDescription("How long handlers ran, per attempt"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10))
	check(e)
	t.workerEvents, e = m.Int64Counter(MetricWorkerEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Worker events: claimed, completed, failed, dead, lease_lost, recovered, released, abandoned"))
	check(e)
	t.attempts, e = m.Int64Histogram(MetricAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts a receipt took to complete or go DEAD"),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100))
	check(e)
	t.dropped, e = m.Int64Counter(MetricEventsDropped, metric.WithUnit("{event}"),
		metric.WithDescription("Worker events ObserveWorker lost because its buffer was full"))
	check(e)
	t.backlogDue, e = m.Int64ObservableGauge(MetricBacklogDue, metric.WithUnit("{receipt}"),
		metric.WithDescription("PENDING and RETRYABLE receipts whose time has come"))
	check(e)
	t.backlogAge, e = m.Float64ObservableGauge(MetricBacklogAge, metric.WithUnit("s"),
		metric.WithDescription("How long the longest-waiting due receipt has been due"))
	check(e)
	t.backlogCounts, e = m.Int64ObservableGauge(MetricBacklogReceipts, metric.WithUnit("{receipt}"),
		metric.WithDescription("Receipts per status, COMPLETED excepted"))
	check(e)
	return err
}

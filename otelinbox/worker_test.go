package otelinbox_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/otelinbox"
)

// With TraceLink, each handler call starts a trace of its own, linked to the
// accept span in its metadata.
func TestTraceLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{Trace: otelinbox.TraceLink})
	if _, err := r.client(t).Accept(ctx, order("a", 1)); err != nil {
		t.Fatal(err)
	}
	w := r.worker(t, func(context.Context, *handler.Msg) error { return nil }, r.tel.HandlerMiddleware())
	obs, err := r.tel.ObserveWorker(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	obs.Close()
	accept := r.spansNamed("accept " + consumer)[0]
	for _, name := range []string{"process ", "complete "} {
		s := r.spansNamed(name + consumer)[0]
		if s.Parent.IsValid() || s.SpanContext.TraceID() == accept.SpanContext.TraceID() {
			t.Errorf("%s span: parent %v, trace %v; want a new root", s.Name, s.Parent, s.SpanContext.TraceID())
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != accept.SpanContext.SpanID() {
			t.Errorf("%s span links %v, want the accept span", s.Name, s.Links)
		}
	}
}

// A panicking handler's span ends with an error status; the worker still
// records the attempt.
func TestHandlerPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{})
	if _, err := r.client(t).Accept(ctx, order("a", 1)); err != nil {
		t.Fatal(err)
	}
	w := r.worker(t, func(context.Context, *handler.Msg) error { panic("boom") }, r.tel.HandlerMiddleware())
	obs, err := r.tel.ObserveWorker(w)
	if err != nil {
		t.Fatal(err)
	}
	// Retries come at once, until the attempts are spent.
	if n, err := w.Drain(ctx); err != nil || n != inbox.DefaultMaxAttempts {
		t.Fatalf("drain: %d, %v; want %d attempts", n, err, inbox.DefaultMaxAttempts)
	}
	obs.Close()
	for _, s := range r.spansNamed("process " + consumer) {
		if s.Status.Code != codes.Error || s.Status.Description != "handler panicked" {
			t.Errorf("status %v", s.Status)
		}
	}
	if got := len(r.spansNamed("retry " + consumer)); got != inbox.DefaultMaxAttempts-1 {
		t.Errorf("%d retry spans, want %d", got, inbox.DefaultMaxAttempts-1)
	}
	if got := len(r.spansNamed("dead " + consumer)); got != 1 {
		t.Errorf("%d dead spans, want 1", got)
	}
}

// A subscriber that cannot keep up (here: a span exporter that blocks) never
// slows the worker down: it drains everything, and every event is either
// recorded or counted as dropped.
func TestBlockedObserverDoesNotStopTheWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t, otelinbox.Config{EventBuffer: 1})
	release := make(chan struct{})
	blocked := sdktrace.NewTracerProvider(sdktrace.WithSyncer(blockingExporter{release}))
	defer blocked.Shutdown(context.Background())
	slow, err := otelinbox.New(otelinbox.Config{TracerProvider: blocked, MeterProvider: r.mp, EventBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	client := r.client(t)
	const n = 40
	for i := range n {
		if _, err := client.Accept(ctx, order(fmt.Sprint("evt-", i), i)); err != nil {
			t.Fatal(err)
		}
	}
	w := r.worker(t, func(context.Context, *handler.Msg) error { return nil })
	obs, err := slow.ObserveWorker(w)
	if err != nil {
		t.Fatal(err)
	}
	done, err := w.Drain(ctx)
	if err != nil || done != n {
		t.Fatalf("drain: %d, %v; want %d", done, err, n)
	}
	var completed int
	if err := r.pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE status = 'COMPLETED'").Scan(&completed); err != nil || completed != n {
		t.Fatalf("%d COMPLETED (%v), want %d", completed, err, n)
	}
	if obs.Dropped() == 0 {
		t.Fatal("nothing dropped although the observer was blocked")
	}
	close(release)
	obs.Close()
	rm := r.metrics(t)
	recorded, _ := total(t, rm, otelinbox.MetricWorkerEvents)
	dropped, _ := total(t, rm, otelinbox.MetricEventsDropped)
	if dropped != float64(obs.Dropped()) || recorded+dropped != 2*n {
		t.Errorf("%v events recorded + %v dropped (observer says %d), want %d in all", recorded, dropped, obs.Dropped(), 2*n)
	}
	wantSum(t, rm, otelinbox.MetricWorkerEvents, recorded, attribute.String("messaging.system", "pginbox"))
}

// blockingExporter holds every export until release is closed.
type blockingExporter struct{ release chan struct{} }

func (e blockingExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
	}
	return nil
}

func (blockingExporter) Shutdown(context.Context) error { return nil }

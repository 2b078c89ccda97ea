package otelinbox_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/otelinbox"
)

// BenchmarkAcceptMiddleware is the CPU the accept middleware adds to one
// Accept, without the database: a real SDK, spans to a batch processor.
func BenchmarkAcceptMiddleware(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer tp.Shutdown(context.Background())
	tel, err := otelinbox.New(otelinbox.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		b.Fatal(err)
	}
	accept := tel.AcceptMiddleware()(func(context.Context, inbox.Message) (inbox.AcceptResult, error) {
		return inbox.AcceptResult{Outcome: inbox.Accepted}, nil
	})
	msg := order("evt-1", 1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := accept(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
}

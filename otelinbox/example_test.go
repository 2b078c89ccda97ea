package otelinbox_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/otelinbox"
	"github.com/pginbox/pginbox/outbox"
)

// Wire the accept middleware into the client, the handler middleware into
// the worker, observe the worker's events and wrap the outbox relay's
// publisher: one trace runs from accept to the handler, its outcome and the
// event it emits; the relay's publish span starts another, linked to the
// emit span.
func ExampleTelemetry() {
	ctx := context.Background()
	dsn, drop, err := inboxtest.NewDatabase(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer drop()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	spans := tracetest.NewInMemoryExporter() // an OTLP exporter in production
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	tel, err := otelinbox.New(otelinbox.Config{TracerProvider: tp})
	if err != nil {
		log.Fatal(err)
	}
	client, err := inbox.NewClient(pool, inbox.Config{
		AcceptMiddleware:      []inbox.AcceptMiddleware{tel.AcceptMiddleware()},
		AcceptBatchMiddleware: []inbox.AcceptBatchMiddleware{tel.AcceptBatchMiddleware()},
	})
	if err != nil {
		log.Fatal(err)
	}
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: "orders.projection.v1", EventType: "order.created", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			_, err := outbox.Emit(ctx, m.Tx, outbox.Event{ // an emit span under the handler's
				Type: "order.confirmed", SchemaVersion: 1, Source: "orders", Destination: "billing.v1",
				Payload: map[string]string{"orderId": "o-1"},
			})
			return err
		})
	if err != nil {
		log.Fatal(err)
	}
	worker, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		HandlerMiddleware: []handler.Middleware{tel.HandlerMiddleware()},
	})
	if err != nil {
		log.Fatal(err)
	}
	events, err := tel.ObserveWorker(worker)
	if err != nil {
		log.Fatal(err)
	}

	_, err = client.Accept(ctx, inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant("acme"), Source: "checkout", Consumer: "orders.projection.v1", MessageID: "evt-1"},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       map[string]string{"orderId": "o-1"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := worker.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	events.Close() // records the events still buffered

	broker := outbox.PublishFunc(func(ctx context.Context, m outbox.Message) error { return nil }) // a transport in production
	relay, err := outbox.NewRelay(pool, tel.Publisher(broker), outbox.RelayConfig{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := relay.Drain(ctx); err != nil {
		log.Fatal(err)
	}

	var names []string
	traces := map[string]bool{}
	for _, s := range spans.GetSpans() {
		names = append(names, s.Name)
		traces[s.SpanContext.TraceID().String()] = true
	}
	slices.Sort(names)
	fmt.Println(names)
	fmt.Println("traces:", len(traces))
	// Output:
	// [accept orders.projection.v1 complete orders.projection.v1 emit billing.v1 process orders.projection.v1 publish billing.v1]
	// traces: 2
}

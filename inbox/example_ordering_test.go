package inbox_test

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// Two events about one payment must apply in the order they were accepted:
// both carry the payment as their ordering key, so the refund waits until
// the capture's handler committed, however many handlers run at once.
// Events of other payments (other keys) still run concurrently.
func ExampleMessage_orderingKey() {
	ctx := context.Background()
	pool, client, done := exampleSetup(inbox.Config{})
	defer done()

	const consumer = "payments.ledger.v1"
	reg := handler.NewRegistry()
	for _, eventType := range []string{"payment.captured", "payment.refunded"} {
		err := reg.Register(handler.Key{Consumer: consumer, EventType: eventType, SchemaVersion: 1},
			func(ctx context.Context, m *handler.Msg) error {
				fmt.Println("handled", m.EventType, m.MessageID)
				return nil
			})
		if err != nil {
			panic(err)
		}
	}
	for _, ev := range []struct{ id, eventType string }{{"evt-1", "payment.captured"}, {"evt-2", "payment.refunded"}} {
		res, err := client.Accept(ctx, inbox.Message{
			Identity: inbox.Identity{Scope: inbox.Tenant("tenant-42"), Source: "payments-service",
				Consumer: consumer, MessageID: ev.id},
			EventType: ev.eventType, SchemaVersion: 1,
			Payload:     map[string]string{"paymentId": "pay-1"},
			OrderingKey: "pay-1", // the aggregate the events are about
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Outcome, ev.eventType)
	}

	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Concurrency: 4, Logger: discardLogger})
	if err != nil {
		panic(err)
	}
	if _, err := w.Drain(ctx); err != nil {
		panic(err)
	}

	// Output:
	// accepted payment.captured
	// accepted payment.refunded
	// handled payment.captured evt-1
	// handled payment.refunded evt-2
}

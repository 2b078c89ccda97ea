package inbox_test

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

// A transport consumer accepts a delivery, then acknowledges it only if the
// inbox says so. The second delivery of the same event is a duplicate: the
// transport acknowledges it too, and nothing new is stored.
func ExampleClient_Accept() {
	ctx := context.Background()
	_, client, done := exampleSetup(inbox.Config{
		Consumers: []string{"orders.projection.v1"}, // reject typos instead of orphaning a backlog
	})
	defer done()

	msg := inbox.Message{
		Identity: inbox.Identity{
			Scope:     inbox.Tenant("tenant-42"), // from authenticated context, never the payload
			Source:    "orders-service",
			Consumer:  "orders.projection.v1",
			MessageID: "evt-7f3a", // the producer's event ID, the same on every redelivery
		},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       map[string]any{"orderId": "o-1001", "total": "59.90"},
		Metadata:      map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	for range 2 { // the broker redelivers
		res, err := client.Accept(ctx, msg)
		switch inbox.ActionFor(err) {
		case inbox.ActionAck:
			fmt.Printf("%s (%s): ack the delivery\n", res.Outcome, res.Status)
		case inbox.ActionRetry:
			fmt.Printf("not stored for sure (%v): do not ack, let the transport redeliver\n", err)
		case inbox.ActionReject:
			fmt.Printf("can never be stored (%v): reject or dead-letter\n", err)
		}
	}

	// Output:
	// accepted (PENDING): ack the delivery
	// duplicate (PENDING): ack the delivery
}

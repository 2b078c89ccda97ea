package inbox_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// A transport consumer accepts a delivery, then acknowledges it only if the
// inbox says so.
func ExampleClient_Accept() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	client, err := inbox.NewClient(pool, inbox.Config{
		Consumers: []string{"orders.projection.v1"}, // reject typos instead of orphaning a backlog
	})
	if err != nil {
		log.Fatal(err)
	}

	res, err := client.Accept(ctx, inbox.Message{
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
	})
	switch inbox.ActionFor(err) {
	case inbox.ActionAck:
		log.Printf("%s receipt %s (%s): ack the delivery", res.Outcome, res.ID, res.Status)
	case inbox.ActionRetry:
		log.Printf("not stored for sure (%v): do not ack, let the transport redeliver", err)
	case inbox.ActionReject:
		log.Printf("can never be stored (%v): reject or dead-letter", err)
	}
}

package outbox_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

// An event emitted in a transaction is published once that transaction
// commits; a rolled-back transaction leaves nothing to publish.
func ExampleEmit() {
	ctx := context.Background()
	dsn, drop, err := inboxtest.NewDatabase(ctx)
	if err != nil {
		panic(err)
	}
	defer drop()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	confirm := func(orderID string, commit bool) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		// ... the business writes go through tx ...
		_, err = outbox.Emit(ctx, tx, outbox.Event{
			Type: "order.confirmed", SchemaVersion: 1,
			Source: "orders", Destination: "billing.v1", OrderingKey: orderID,
			Payload: map[string]string{"orderId": orderID},
		})
		if err != nil || !commit {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := confirm("o-1", true); err != nil {
		panic(err)
	}
	if err := confirm("o-2", false); err != nil { // rolled back
		panic(err)
	}

	pub := outbox.PublishFunc(func(ctx context.Context, m outbox.Message) error {
		fmt.Printf("publishing %s v%d to %s: %s\n", m.EventType, m.SchemaVersion, m.Destination, m.Payload)
		return nil // a broker client would send m, with m.ID as its message ID
	})
	relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	n, err := relay.Drain(ctx) // a service runs relay.Run(ctx) instead
	if err != nil {
		panic(err)
	}
	fmt.Println("published:", n)
	// Output:
	// publishing order.confirmed v1 to billing.v1: {"orderId":"o-1"}
	// published: 1
}

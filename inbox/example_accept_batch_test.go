package inbox_test

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

// A transport that acknowledges per batch (Kafka offsets, NATS ack-all)
// accepts many deliveries in one statement and one commit, and still gets a
// result per message: an invalid or conflicting one does not stop the others.
func ExampleClient_AcceptBatch() {
	ctx := context.Background()
	_, client, done := exampleSetup(inbox.Config{})
	defer done()

	forBilling := orderMsg("evt-1", map[string]any{"orderId": "o-1"})
	forBilling.Consumer = "billing.v1" // another consumer: a receipt of its own
	changed := orderMsg("evt-1", map[string]any{"orderId": "o-999"})
	invalid := orderMsg("evt-2", map[string]any{"orderId": "o-2"})
	invalid.SchemaVersion = 0

	msgs := []inbox.Message{
		orderMsg("evt-1", map[string]any{"orderId": "o-1"}),
		forBilling,
		orderMsg("evt-1", map[string]any{"orderId": "o-1"}), // a repeat inside the batch
		changed, // same identity, other content
		invalid,
	}
	items, err := client.AcceptBatch(ctx, msgs)
	if err != nil {
		panic(err) // nothing is certain: acknowledge none, let them be redelivered
	}
	for i, it := range items {
		fmt.Printf("%s %s: %s -> %s\n", msgs[i].MessageID, msgs[i].Consumer, it.Outcome, it.Action())
	}

	// Output:
	// evt-1 orders.projection.v1: accepted -> ack
	// evt-1 billing.v1: accepted -> ack
	// evt-1 orders.projection.v1: duplicate -> ack
	// evt-1 orders.projection.v1: conflict -> reject
	// evt-2 orders.projection.v1: invalid -> reject
}

// AcceptTx stores the receipt in the caller's transaction: it commits with the
// caller's own writes, or neither does.
func ExampleClient_AcceptTx() {
	ctx := context.Background()
	pool, client, done := exampleSetup(inbox.Config{})
	defer done()
	if _, err := pool.Exec(ctx, `CREATE TABLE checkout_log (order_id text PRIMARY KEY)`); err != nil {
		panic(err)
	}

	record := func(orderID string, commit bool) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			panic(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO checkout_log VALUES ($1)`, orderID); err != nil {
			panic(err)
		}
		res, err := client.AcceptTx(ctx, tx, orderMsg("evt-"+orderID, map[string]any{"orderId": orderID}))
		if err != nil {
			panic(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				panic(err)
			}
		}
		fmt.Printf("%s: %s, committed: %t\n", orderID, res.Outcome, commit)
	}
	record("o-1", false) // rolled back: the receipt goes with it
	record("o-2", true)

	var logged, receipts int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM checkout_log), (SELECT count(*) FROM pginbox_receipts)`).Scan(&logged, &receipts); err != nil {
		panic(err)
	}
	fmt.Println("logged:", logged, "receipts:", receipts)

	// Output:
	// o-1: accepted, committed: false
	// o-2: accepted, committed: true
	// logged: 1 receipts: 1
}

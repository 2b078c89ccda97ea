package shop_test

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/examples/shop"
	"github.com/pginbox/pginbox/examples/shop/shopdb"
	"github.com/pginbox/pginbox/inbox"
)

// The checkout writes its order and accepts the event for billing in one
// transaction: the order exists exactly when billing will hear of it.
func ExampleAcceptOrderCreatedTx() {
	ctx := context.Background()
	pool, client, done := exampleShop()
	defer done()

	checkout := func(orderID string, commit bool) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			panic(err)
		}
		defer tx.Rollback(ctx)
		o := shop.OrderCreated{OrderID: orderID, CustomerID: "c-1", TotalCents: 500}
		err = shopdb.New(tx).InsertOrder(ctx, shopdb.InsertOrderParams{
			TenantID: "acme", OrderID: o.OrderID, CustomerID: o.CustomerID, TotalCents: o.TotalCents, Currency: "EUR",
		})
		if err != nil {
			panic(err)
		}
		d := shop.Delivery{Scope: inbox.Tenant("acme"), Source: "checkout", MessageID: "evt-" + orderID}
		res, err := shop.AcceptOrderCreatedTx(ctx, client, tx, shop.BillingV1, d, o)
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
	checkout("o-1", false) // the checkout failed later: neither the order nor the receipt stays
	checkout("o-2", true)

	orders, err := shopdb.New(pool).ListOrders(ctx)
	if err != nil {
		panic(err)
	}
	var receipts int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts").Scan(&receipts); err != nil {
		panic(err)
	}
	fmt.Println("orders:", len(orders), "receipts:", receipts)

	// Output:
	// o-1: accepted, committed: false
	// o-2: accepted, committed: true
	// orders: 1 receipts: 1
}

// The generated consumer values name the consumers; ConsumerNames lists them
// all, for inbox.Config.Consumers, so an accept for any other consumer (a
// typo) is rejected instead of leaving receipts nobody handles.
func ExampleConsumerNames() {
	ctx := context.Background()
	_, client, done := exampleShop() // its client has Consumers: shop.ConsumerNames()
	defer done()

	fmt.Println(shop.ConsumerNames())
	fmt.Println(shop.OrdersProjectionV1.Name(), shop.BillingV1.Name())

	_, err := client.Accept(ctx, inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant("acme"), Source: "checkout", Consumer: "biling.v1", MessageID: "evt-1"},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       shop.OrderCreated{OrderID: "o-1"},
	})
	fmt.Println(inbox.ActionFor(err), err)

	// Output:
	// [billing.v1 orders.projection.v1]
	// orders.projection.v1 billing.v1
	// reject pginbox: invalid consumer (undeclared_consumer): "biling.v1" is not in Config.Consumers; add it there or fix the name
}

package shop_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/examples/shop"
	"github.com/pginbox/pginbox/examples/shop/shopdb"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// A transport accepts each delivery through the generated function of its
// event: only a consumer that declared the event compiles as its target.
func ExampleAcceptOrderCreated() {
	ctx := context.Background()
	_, client, done := exampleShop()
	defer done()

	d := shop.Delivery{Scope: inbox.Tenant("acme"), Source: "checkout", MessageID: "evt-1"}
	order := shop.OrderCreated{OrderID: "o-1", CustomerID: "c-1", TotalCents: 1250}
	for range 2 { // the broker delivers twice
		res, err := shop.AcceptOrderCreated(ctx, client, shop.BillingV1, d, order)
		fmt.Println(res.Outcome, inbox.ActionFor(err))
	}

	// OrderCreated.Validate rejects a negative total before anything is stored.
	d.MessageID = "evt-2"
	_, err := shop.AcceptOrderCreated(ctx, client, shop.BillingV1, d, shop.OrderCreated{OrderID: "o-2", TotalCents: -1})
	fmt.Println(inbox.ActionFor(err), err)

	// Output:
	// accepted ack
	// duplicate ack
	// reject pginbox: invalid payload (validate): totalCents -1 is negative
}

// A worker runs a consumer's handler, registered with the generated function:
// every method of the handler's interface gets the shop's sqlc queries bound
// to the transaction that also completes the receipt.
func ExampleRegisterOrdersProjectionV1() {
	ctx := context.Background()
	pool, client, done := exampleShop()
	defer done()
	d := shop.Delivery{Scope: inbox.Tenant("acme"), Source: "checkout", MessageID: "evt-1"}
	if _, err := shop.AcceptOrderCreated(ctx, client, shop.OrdersProjectionV1, d, shop.OrderCreated{OrderID: "o-1", CustomerID: "c-1", TotalCents: 1250}); err != nil {
		panic(err)
	}

	reg := handler.NewRegistry()
	if err := shop.RegisterOrdersProjectionV1(reg, shop.Projection{}); err != nil {
		panic(err)
	}
	// A second registration of the consumer changes nothing.
	err := shop.RegisterOrdersProjectionV1(reg, shop.Projection{})
	fmt.Println("registered twice:", errors.Is(err, handler.ErrDuplicateHandler))

	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Consumers:   []string{shop.OrdersProjectionV1.Name()},
		Concurrency: 2,
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	n, err := w.Drain(ctx) // a service calls w.Run(ctx) instead
	if err != nil {
		panic(err)
	}
	fmt.Println("handled:", n)
	orders, err := shopdb.New(pool).ListOrders(ctx)
	if err != nil {
		panic(err)
	}
	for _, o := range orders {
		fmt.Println(o.OrderID, o.TotalCents, o.Currency, o.Status)
	}

	// Output:
	// registered twice: true
	// handled: 1
	// o-1 1250 EUR open
}

// One event for two consumers, accepted together: the generated message
// builders feed AcceptBatch, which accepts both in one statement and one
// commit, so an error (or a crash) leaves neither stored.
func ExampleOrderCreatedMessage() {
	ctx := context.Background()
	_, client, done := exampleShop()
	defer done()

	d := shop.Delivery{Scope: inbox.Tenant("acme"), Source: "checkout", MessageID: "evt-1"}
	order := shop.OrderCreated{OrderID: "o-1", CustomerID: "c-1", TotalCents: 990}
	var msgs []inbox.Message
	for _, to := range []shop.OrderCreatedConsumer{shop.OrdersProjectionV1, shop.BillingV1} {
		msg, err := shop.OrderCreatedMessage(to, d, order)
		if err != nil {
			panic(err) // a *inbox.ValidationError from OrderCreated.Validate
		}
		msgs = append(msgs, msg)
	}
	items, err := client.AcceptBatch(ctx, msgs)
	if err != nil {
		panic(err) // nothing stored: redeliver
	}
	for i, it := range items {
		fmt.Println(msgs[i].Consumer, it.Outcome, it.Action())
	}

	// Output:
	// orders.projection.v1 accepted ack
	// billing.v1 accepted ack
}

// exampleShop returns a pool on a fresh database with pginbox's schema and
// the shop's tables (TestMain registers them), and a client for the shop's
// consumers. Examples get no *testing.T, so they use inboxtest.NewDatabase.
func exampleShop() (*pgxpool.Pool, *inbox.Client, func()) {
	ctx := context.Background()
	dsn, drop, err := inboxtest.NewDatabase(ctx)
	if err != nil {
		panic(err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	cfg.MaxConns = 6 // two handlers, the worker's listener and claims, Accept
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: shop.ConsumerNames()})
	if err != nil {
		panic(err)
	}
	return pool, client, func() {
		pool.Close()
		drop()
	}
}

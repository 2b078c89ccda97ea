package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// projection registers an order.created handler for orders.projection.v1
// that inserts the order into order_projection, creating that table.
func projection(ctx context.Context, pool *pgxpool.Pool, fn func(ctx context.Context, m *handler.Msg, e OrderCreated) error) *handler.Registry {
	if _, err := pool.Exec(ctx, `CREATE TABLE order_projection (order_id text PRIMARY KEY)`); err != nil {
		panic(err)
	}
	reg := handler.NewRegistry()
	err := reg.Register(handler.Key{Consumer: "orders.projection.v1", EventType: "order.created", SchemaVersion: 1},
		handler.Typed(handler.DecodeOptions{}, func(ctx context.Context, m *handler.Msg, e OrderCreated) error {
			if err := fn(ctx, m, e); err != nil {
				return err
			}
			_, err := m.Tx.Exec(ctx, `INSERT INTO order_projection VALUES ($1)`, e.OrderID)
			return err
		}))
	if err != nil {
		panic(err)
	}
	return reg
}

// Subscribe streams what happens to receipts in a worker: here a handler
// that fails once, is retried and completes.
func ExampleWorker_Subscribe() {
	ctx := context.Background()
	pool, client, done := exampleSetup(inbox.Config{})
	defer done()
	failed := false
	reg := projection(ctx, pool, func(ctx context.Context, m *handler.Msg, e OrderCreated) error {
		if !failed {
			failed = true
			return errors.New("inventory service unavailable")
		}
		return nil
	})
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Backoff: func(int) time.Duration { return 0 }, // retry at once, for the example
		Logger:  discardLogger,
	})
	if err != nil {
		panic(err)
	}
	sub := w.Subscribe(inbox.SubscribeConfig{}) // every kind of event
	defer sub.Close()

	if _, err := client.Accept(ctx, orderMsg("evt-1", OrderCreated{OrderID: "o-1"})); err != nil {
		panic(err)
	}
	if _, err := w.Drain(ctx); err != nil { // a service calls w.Run(ctx) instead
		panic(err)
	}
	for range 4 {
		e := <-sub.C()
		fmt.Printf("%s %s attempt %d", e.Kind, e.EventType, e.Attempt)
		if e.Err != nil {
			fmt.Printf(": %v", e.Err)
		}
		fmt.Println()
	}
	fmt.Println("dropped:", sub.Dropped())

	// Output:
	// claimed order.created attempt 1
	// failed order.created attempt 1: inventory service unavailable
	// claimed order.created attempt 2
	// completed order.created attempt 2
	// dropped: 0
}

// With MessagesPerTx a handler transaction carries several messages and one
// commit. A failing message rolls back alone: the others run again without it
// and commit, and only it is charged.
func ExampleWorkerConfig_messagesPerTx() {
	ctx := context.Background()
	pool, client, done := exampleSetup(inbox.Config{})
	defer done()
	reg := projection(ctx, pool, func(ctx context.Context, m *handler.Msg, e OrderCreated) error {
		if e.OrderID == "o-7" {
			return handler.Permanent(errors.New("order o-7 has no lines"))
		}
		return nil
	})
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Concurrency:   1,
		MessagesPerTx: 10,
		Logger:        discardLogger,
	})
	if err != nil {
		panic(err)
	}
	outcomes := w.Subscribe(inbox.SubscribeConfig{Kinds: []inbox.EventKind{inbox.EventCompleted, inbox.EventDead}})
	defer outcomes.Close()

	for i := 1; i <= 10; i++ {
		id := fmt.Sprintf("o-%d", i)
		if _, err := client.Accept(ctx, orderMsg("evt-"+id, OrderCreated{OrderID: id})); err != nil {
			panic(err)
		}
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	count := map[inbox.EventKind]int{}
	for range 10 {
		select {
		case e := <-outcomes.C():
			count[e.Kind]++
			if e.Kind == inbox.EventDead {
				fmt.Println("dead:", e.Err)
			}
		case <-time.After(30 * time.Second):
			fmt.Println("timed out")
		}
	}
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	var projected int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM order_projection`).Scan(&projected); err != nil {
		panic(err)
	}
	fmt.Println("completed:", count[inbox.EventCompleted], "projected:", projected)

	// Output:
	// dead: order o-7 has no lines
	// completed: 9 projected: 9
}

package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

type OrderCreated struct {
	OrderID string `json:"orderId"`
}

// A worker applies each accepted event in one transaction with its completion:
// a redelivered event is accepted as a duplicate and applied once.
func ExampleWorker() {
	ctx := context.Background()
	dsn, stopDB := exampleDatabase()
	defer stopDB()

	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	cfg.MaxConns = 8 // 4 handlers + listener, claims and heartbeats + Accept
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE order_projection (
		tenant_id text, order_id text, PRIMARY KEY (tenant_id, order_id))`); err != nil {
		panic(err)
	}

	handled := make(chan struct{}, 1)
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: "orders.projection.v1", EventType: "order.created", SchemaVersion: 1},
		handler.Typed(handler.DecodeOptions{}, func(ctx context.Context, m *handler.Msg, e OrderCreated) error {
			// Write through m.Tx: the completion commits with it, or neither does.
			_, err := m.Tx.Exec(ctx, "INSERT INTO order_projection (tenant_id, order_id) VALUES ($1, $2)", m.Scope.ID, e.OrderID)
			fmt.Printf("projecting %s for %s, attempt %d\n", e.OrderID, m.Scope.ID, m.Attempt)
			handled <- struct{}{}
			return err
		}))
	if err != nil {
		panic(err)
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Consumers:   []string{"orders.projection.v1"},
		Concurrency: 4,
		Logger:      slog.New(slog.DiscardHandler), // keep the example's output to the point
	})
	if err != nil {
		panic(err)
	}
	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		panic(err)
	}
	msg := inbox.Message{
		Identity: inbox.Identity{
			Scope:     inbox.Tenant("tenant-42"),
			Source:    "orders-service",
			Consumer:  "orders.projection.v1",
			MessageID: "evt-7f3a",
		},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       OrderCreated{OrderID: "o-1001"},
	}
	for range 2 { // the transport delivers twice
		res, err := client.Accept(ctx, msg)
		if err != nil {
			panic(err)
		}
		fmt.Println("accept:", res.Outcome)
	}

	// A service calls w.Run(ctx) with ctx from signal.NotifyContext instead.
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	select {
	case <-handled:
	case <-time.After(10 * time.Second):
		fmt.Println("not handled")
	}
	// Stop lets running handlers finish and commit.
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM order_projection").Scan(&rows); err != nil {
		panic(err)
	}
	fmt.Println("projected rows:", rows)

	// Output:
	// accept: accepted
	// accept: duplicate
	// projecting o-1001 for tenant-42, attempt 1
	// projected rows: 1
}

// exampleDatabase is a fresh migrated database from the test harness.
// Examples get no *testing.T, so they cannot use inboxtest.Database.
func exampleDatabase() (dsn string, drop func()) {
	dsn, drop, err := inboxtest.NewDatabase(context.Background())
	if err != nil {
		panic(err)
	}
	return dsn, drop
}

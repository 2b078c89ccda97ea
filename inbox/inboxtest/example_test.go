package inboxtest_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// A runnable example gets no *testing.T, so it takes its database from
// NewDatabase: a fresh one with pginbox's schema, dropped when done.
func ExampleNewDatabase() {
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

	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		panic(err)
	}
	res, err := client.Accept(ctx, inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant("acme"), Source: "checkout", Consumer: "billing.v1", MessageID: "evt-1"},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       map[string]any{"orderId": "o-1"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Status)

	// Output:
	// accepted PENDING
}

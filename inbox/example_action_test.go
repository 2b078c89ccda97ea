package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// ActionFor turns every accept outcome into what the transport does with the
// delivery, so transports never inspect errors themselves.
func ExampleActionFor() {
	ctx := context.Background()
	pool, client, done := exampleSetup(inbox.Config{})
	defer done()

	show := func(what string, err error) { fmt.Printf("%-10s -> %s\n", what, inbox.ActionFor(err)) }

	_, err := client.Accept(ctx, orderMsg("evt-1", map[string]any{"orderId": "o-1"}))
	show("accepted", err)
	_, err = client.Accept(ctx, orderMsg("evt-1", map[string]any{"orderId": "o-1"}))
	show("duplicate", err)
	_, err = client.Accept(ctx, orderMsg("evt-2", json.RawMessage(`{"orderId": "o-2", "orderId": "o-3"}`)))
	show("invalid", err) // a *ValidationError: redelivering it cannot help
	_, err = client.Accept(ctx, orderMsg("evt-1", map[string]any{"orderId": "o-999"}))
	show("conflict", err) // a *ConflictError: same identity, other content

	// A storage failure: here the client's pool is closed, in production the
	// database is down or the connection broke. The delivery must come again.
	down, err := pgxpool.New(ctx, pool.Config().ConnString())
	if err != nil {
		panic(err)
	}
	down.Close()
	broken, err := inbox.NewClient(down, inbox.Config{Logger: discardLogger})
	if err != nil {
		panic(err)
	}
	_, err = broken.Accept(ctx, orderMsg("evt-3", map[string]any{"orderId": "o-3"}))
	show("storage", err)
	show("uncertain", inbox.ErrCommitUncertain) // the commit's outcome is unknown

	// Output:
	// accepted   -> ack
	// duplicate  -> ack
	// invalid    -> reject
	// conflict   -> reject
	// storage    -> retry
	// uncertain  -> retry
}

package inbox_test

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// Accept middleware sees every message before validation and its outcome
// after the commit: the place for tracing, metrics and logs.
func ExampleAcceptMiddleware() {
	ctx := context.Background()
	logOutcome := func(next inbox.AcceptFunc) inbox.AcceptFunc {
		return func(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error) {
			res, err := next(ctx, msg)
			fmt.Printf("accept %s: outcome %q, %s\n", msg.MessageID, res.Outcome, inbox.ActionFor(err))
			return res, err
		}
	}
	_, client, done := exampleSetup(inbox.Config{AcceptMiddleware: []inbox.AcceptMiddleware{logOutcome}})
	defer done()

	for _, msg := range []inbox.Message{
		orderMsg("evt-1", OrderCreated{OrderID: "o-1"}),
		orderMsg("evt-1", OrderCreated{OrderID: "o-1"}),
		orderMsg("", OrderCreated{OrderID: "o-2"}), // no message ID
	} {
		client.Accept(ctx, msg)
	}

	// Output:
	// accept evt-1: outcome "accepted", ack
	// accept evt-1: outcome "duplicate", ack
	// accept : outcome "", reject
}

// Handler middleware wraps every handler call inside the message's
// transaction: here it logs each attempt and its result.
func ExampleWorkerConfig_handlerMiddleware() {
	ctx := context.Background()
	pool, client, done := exampleSetup(inbox.Config{})
	defer done()
	reg := projection(ctx, pool, func(context.Context, *handler.Msg, OrderCreated) error { return nil })
	logCalls := func(next handler.Func) handler.Func {
		return func(ctx context.Context, m *handler.Msg) error {
			err := next(ctx, m)
			fmt.Printf("%s %s %s attempt %d: %v\n", m.Consumer, m.EventType, m.MessageID, m.Attempt, err)
			return err
		}
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		HandlerMiddleware: []handler.Middleware{logCalls},
		Logger:            discardLogger,
	})
	if err != nil {
		panic(err)
	}
	if _, err := client.Accept(ctx, orderMsg("evt-1", OrderCreated{OrderID: "o-1"})); err != nil {
		panic(err)
	}
	if _, err := w.Drain(ctx); err != nil {
		panic(err)
	}

	// Output:
	// orders.projection.v1 order.created evt-1 attempt 1: <nil>
}

package inboxtest_test

import (
	"context"
	"testing"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

// OrderPaid is the payload of the application's order.paid event.
type OrderPaid struct {
	OrderID string `json:"orderId"`
}

// orderPaidTest is an application's test of a handler that emits an event:
// in your _test.go file it is TestOrderPaidShips.
func orderPaidTest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := inboxtest.Pool(t)

	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: "shipping.v1", EventType: "order.paid", SchemaVersion: 1},
		handler.Typed(handler.DecodeOptions{}, func(ctx context.Context, m *handler.Msg, p OrderPaid) error {
			// Emitted in the handler's transaction: it commits with the completion.
			_, err := outbox.Emit(ctx, m.Tx, outbox.Event{
				Type: "shipment.requested", SchemaVersion: 1, Source: "shipping",
				Destination: "warehouse.v1", OrderingKey: p.OrderID, Payload: p,
			})
			return err
		}))
	if err != nil {
		t.Fatal(err)
	}
	worker, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}

	msg := inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant("acme"), Source: "payments", Consumer: "shipping.v1", MessageID: "pay-1"},
		EventType:     "order.paid",
		SchemaVersion: 1,
		Payload:       OrderPaid{OrderID: "o-1"},
	}
	if _, err := client.Accept(ctx, msg); err != nil {
		t.Fatal(err)
	}
	inboxtest.Drain(t, worker)
	// On failure: the events the handler did emit, and its receipt's state.
	evs := inboxtest.RequireEmitted(t, pool, msg.Identity, "shipment.requested")
	if string(evs[0].Payload) != `{"orderId":"o-1"}` || evs[0].Scope != inbox.Tenant("acme") {
		t.Fatalf("emitted %s with payload %s in %s", evs[0], evs[0].Payload, evs[0].Scope)
	}
}

// RequireEmitted checks what a handler emitted to the outbox: the events its
// committed transaction wrote, in order, with their payloads and scope. An
// example gets no *testing.T, so this one shows the test above; this
// package's TestRequireEmittedExample runs it.
func ExampleRequireEmitted() {}

func TestRequireEmittedExample(t *testing.T) {
	orderPaidTest(t)
}

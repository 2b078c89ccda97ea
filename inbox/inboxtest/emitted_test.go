package inboxtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

// emitting returns a handler that emits one order.shipped event per type
// given, then fails with fail (nil: completes).
func emitting(fail error, types ...string) handler.Func {
	return func(ctx context.Context, m *handler.Msg) error {
		for _, typ := range types {
			_, err := outbox.Emit(ctx, m.Tx, outbox.Event{Type: typ, SchemaVersion: 1, Source: "orders",
				Destination: "shipping.v1", OrderingKey: m.MessageID, Payload: map[string]string{"orderId": m.MessageID}})
			if err != nil {
				return err
			}
		}
		return fail
	}
}

// The kit reads what each receipt's handler emitted and committed: events
// of another receipt, of a transaction outside any handler, or of a handler
// that failed are not there.
func TestEmitted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, c, w := setup(t, func(ctx context.Context, m *handler.Msg) error {
		switch m.MessageID {
		case "evt-2":
			return emitting(nil, "order.packed", "order.shipped")(ctx, m)
		case "evt-3":
			return emitting(handler.Permanent(errors.New("no stock")), "order.shipped")(ctx, m)
		}
		return nil
	})
	one, two, three := accept(t, c, "evt-1"), accept(t, c, "evt-2"), accept(t, c, "evt-3")
	_, err := outbox.Emit(context.Background(), pool, outbox.Event{Type: "order.other", SchemaVersion: 1, Source: "s", Destination: "d", Payload: map[string]int{}})
	is.NoErr(err)
	is.Equal(inboxtest.Drain(t, w), 3)

	is.Equal(len(inboxtest.Emitted(t, pool, one)), 0)
	is.Equal(len(inboxtest.Emitted(t, pool, three)), 0) // rolled back with the failure
	evs := inboxtest.Emitted(t, pool, two)
	is.Equal(len(evs), 2)
	is.Equal(evs[0].Type, "order.packed")
	is.Equal(evs[1].String(), "order.shipped v1 to shipping.v1 (key evt-2)")
	is.Equal(string(evs[1].Payload), `{"orderId":"evt-2"}`)
	is.Equal(evs[1].Metadata[outbox.MetadataCausationID], "evt-2")
	is.Equal(evs[1].Scope, inbox.Global())
	is.Equal(evs[1].Status, "PENDING")

	got := inboxtest.RequireEmitted(t, pool, identity(consumer, "evt-2"), "order.packed", "order.shipped")
	is.Equal(got[1].ID, evs[1].ID)
	inboxtest.RequireEmitted(t, pool, identity(consumer, "evt-1"))
}

// A mismatch names what the handler emitted instead.
func TestRequireEmittedFailure(t *testing.T) {
	t.Parallel()
	pool, c, w := setup(t, emitting(nil, "order.packed"))
	id := accept(t, c, "evt-1")
	inboxtest.Drain(t, w)

	msg := failure(t, func(t testing.TB) {
		inboxtest.RequireEmitted(t, pool, identity(consumer, "evt-1"), "order.shipped")
	})
	want := "inboxtest.RequireEmitted: want [order.shipped], emitted [order.packed]:\n\torder.packed v1 to shipping.v1 (key evt-1)\n" +
		"by the handler of receipt " + id.String() + " global/test/orders.projection.v1/evt-1 (order.created v1): COMPLETED, attempts 1"
	if msg != want {
		t.Fatalf("failure:\n%s\nwant:\n%s", msg, want)
	}
	msg = failure(t, func(t testing.TB) { inboxtest.RequireEmitted(t, pool, identity(consumer, "evt-1")) })
	if msg == "" {
		t.Fatal("RequireEmitted with no types passed although the handler emitted one")
	}
}

package outbox_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

// An event emitted from a handler's context is linked to the handler's
// receipt (pginbox_outbox.receipt_id) when it has the receipt's scope: in the
// handler's transaction and in a savepoint of it. One emitted through another
// transaction of another scope is not linked (and not refused), and one
// emitted outside any handler has no link.
func TestEmitLinksTheHandlersReceipt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	client, err := inbox.NewClient(pool, inbox.Config{Logger: quiet})
	is.NoErr(err)
	defer client.Close()
	res, err := client.Accept(ctx, inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Tenant("acme"), Source: "storefront", Consumer: "orders.v1", MessageID: "evt-1"},
		EventType: "order.placed", SchemaVersion: 1, Payload: map[string]any{"orderId": "o-1"},
	})
	is.NoErr(err)

	emitAs := func(ctx context.Context, tx outbox.Tx, typ string) {
		ev := event("", 1)
		ev.Type = typ
		_, err := outbox.Emit(ctx, tx, ev)
		is.NoErr(err)
	}
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "orders.v1", EventType: "order.placed", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			emitAs(ctx, m.Tx, "in.handler.tx")
			sp, err := m.Tx.Begin(ctx)
			if err != nil {
				return err
			}
			emitAs(ctx, sp, "in.savepoint")
			if err := sp.Commit(ctx); err != nil {
				return err
			}
			emitAs(ctx, pool, "in.another.tx") // commits on its own, in the global scope
			return nil
		}))
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Logger: quiet})
	is.NoErr(err)
	is.Equal(inboxtest.Drain(t, w), 1)
	emit(t, pool, event("", 2)) // outside any handler

	var linked []string
	for _, e := range inboxtest.Emitted(t, pool, res.ID) {
		linked = append(linked, e.Type)
	}
	is.Equal(linked, []string{"in.handler.tx", "in.savepoint"})
	is.Equal(count(t, pool, "receipt_id IS NULL"), 2)
}

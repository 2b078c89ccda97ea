package inboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func customerDeleted(context.Context, *handler.Msg) error {
	return handler.Permanent(errors.New("customer deleted"))
}

func TestRequireReceipt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, c, _ := setup(t, ok)
	id := accept(t, c, "evt-1")

	r := inboxtest.RequireReceipt(t, pool, identity(consumer, "evt-1"))
	is.Equal(r, inboxtest.Receipt{
		ID:            id,
		Identity:      identity(consumer, "evt-1"),
		EventType:     "order.created",
		SchemaVersion: 1,
		Status:        inbox.StatusPending,
	})
	is.Equal(r.String(), "receipt "+id.String()+" global/test/orders.projection.v1/evt-1 (order.created v1): PENDING, attempts 0")
}

// A missing receipt's failure lists the receipts with the same message ID, the
// usual mistake being another scope, source or consumer.
func TestRequireReceiptMissing(t *testing.T) {
	t.Parallel()
	pool, c, _ := setup(t, ok)
	tenantA := inbox.Identity{Scope: inbox.Tenant("a"), Source: "test", Consumer: consumer, MessageID: "evt-1"}
	near := acceptFor(t, c, tenantA)
	tenantB := tenantA
	tenantB.Scope = inbox.Tenant("b")

	msg := failure(t, func(t testing.TB) { inboxtest.RequireReceipt(t, pool, tenantB) })
	want := "inboxtest.RequireReceipt: no receipt for tenant(b)/test/orders.projection.v1/evt-1; receipts with message ID \"evt-1\":\n\t" +
		"receipt " + near.String() + " tenant(a)/test/orders.projection.v1/evt-1 (order.created v1): PENDING, attempts 0"
	if msg != want {
		t.Fatalf("failure:\n%s\nwant:\n%s", msg, want)
	}

	msg = failure(t, func(t testing.TB) { inboxtest.RequireReceipt(t, pool, identity(consumer, "evt-unknown")) })
	want = `inboxtest.RequireReceipt: no receipt for global/test/orders.projection.v1/evt-unknown; no receipt has message ID "evt-unknown"`
	if msg != want {
		t.Fatalf("failure:\n%s\nwant:\n%s", msg, want)
	}

	// The list is bounded.
	for i := range 7 {
		acceptFor(t, c, identity(fmt.Sprintf("other%d.v1", i), "evt-1"))
	}
	msg = failure(t, func(t testing.TB) { inboxtest.RequireReceipt(t, pool, tenantB) })
	if n := strings.Count(msg, "\n\treceipt "); n != 5 || !strings.HasSuffix(msg, "\n\t...") {
		t.Fatalf("failure lists %d receipts, want 5 and an ellipsis:\n%s", n, msg)
	}
}

func TestRequireStatus(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, c, w := setup(t, customerDeleted)
	id := accept(t, c, "evt-1")
	inboxtest.Drain(t, w)

	r := inboxtest.RequireStatus(t, pool, identity(consumer, "evt-1"), inbox.StatusDead)
	is.Equal(r.ID, id)
	is.Equal(r.Attempts, 1)
	is.Equal(r.LastError, "customer deleted")

	msg := failure(t, func(t testing.TB) {
		inboxtest.RequireStatus(t, pool, identity(consumer, "evt-1"), inbox.StatusCompleted)
	})
	is.Equal(msg, "inboxtest.RequireStatus: want COMPLETED, found receipt "+id.String()+
		" global/test/orders.projection.v1/evt-1 (order.created v1): DEAD, attempts 1, last error: customer deleted")

	msg = failure(t, func(t testing.TB) {
		inboxtest.RequireStatus(t, pool, identity(consumer, "evt-2"), inbox.StatusCompleted)
	})
	is.True(strings.HasPrefix(msg, "inboxtest.RequireStatus: no receipt for global/test/orders.projection.v1/evt-2; "))
}

func TestRequireNoReceipt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, c, _ := setup(t, ok)
	id := accept(t, c, "evt-1")

	is.Equal(failure(t, func(t testing.TB) { inboxtest.RequireNoReceipt(t, pool, identity(consumer, "evt-2")) }), "")
	msg := failure(t, func(t testing.TB) { inboxtest.RequireNoReceipt(t, pool, identity(consumer, "evt-1")) })
	is.Equal(msg, "inboxtest.RequireNoReceipt: want none, found receipt "+id.String()+
		" global/test/orders.projection.v1/evt-1 (order.created v1): PENDING, attempts 0")
}

// A replay shares its original's identity; the assertions report the original.
func TestRequireAfterReplay(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, c, w := setup(t, ok)
	id := accept(t, c, "evt-1")
	inboxtest.Drain(t, w)

	a, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	admin := a.Operator()
	got, err := admin.Get(ctx, id)
	is.NoErr(err)
	res, err := admin.Replay(ctx, id, inbox.ChangeParams{ExpectedVersion: got.Version, Actor: "test", Reason: "rebuild"})
	is.NoErr(err)

	r := inboxtest.RequireStatus(t, pool, identity(consumer, "evt-1"), inbox.StatusCompleted)
	is.Equal(r.ID, id)
	inboxtest.WaitForStatus(t, pool, res.NewID, inbox.StatusPending, 0) // the replay is a receipt of its own
}

// The assertions read through any Querier: inside a transaction they see its
// uncommitted receipts, outside they do not.
func TestRequireInTransaction(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, c, _ := setup(t, ok)
	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	res, err := c.AcceptTx(ctx, tx, inbox.Message{
		Identity: identity(consumer, "evt-1"), EventType: "order.created", SchemaVersion: 1, Payload: map[string]string{"orderId": "o-1"},
	})
	is.NoErr(err)

	is.Equal(inboxtest.RequireReceipt(t, tx, identity(consumer, "evt-1")).ID, res.ID)
	inboxtest.RequireNoReceipt(t, pool, identity(consumer, "evt-1"))
}

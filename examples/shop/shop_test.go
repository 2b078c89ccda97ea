package shop_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/examples/shop"
	"github.com/pginbox/pginbox/examples/shop/shopdb"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) {
	inboxtest.SetMigrate(migrateShop)
	inboxtest.Main(m)
}

// migrateShop adds the shop's tables; every test database has them beside
// pginbox's schema.
func migrateShop(ctx context.Context, dsn string) error {
	ddl, err := os.ReadFile("schema.sql")
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, string(ddl))
	return err
}

// setup returns a pool on a fresh database with pginbox's schema and the
// shop's tables, and an inbox client that accepts only the shop's consumers.
func setup(t *testing.T) (*pgxpool.Pool, *inbox.Client) {
	t.Helper()
	pool := inboxtest.Pool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 8 // the worker's handlers, its listener and claims, and Accept
	})
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: shop.ConsumerNames()})
	if err != nil {
		t.Fatal(err)
	}
	return pool, client
}

func newWorker(t *testing.T, pool *pgxpool.Pool) *inbox.Worker {
	t.Helper()
	reg := handler.NewRegistry()
	if err := shop.RegisterOrdersProjectionV1(reg, shop.Projection{}); err != nil {
		t.Fatal(err)
	}
	if err := shop.RegisterBillingV1(reg, shop.Billing{}); err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Concurrency: 4,
		Logger:      quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// quiet keeps the worker's and the admin's logs out of the test output.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func delivery(id string) shop.Delivery {
	return shop.Delivery{Scope: inbox.Tenant("acme"), Source: "checkout", MessageID: id}
}

// identity is what a delivery of the checkout becomes for one consumer.
func identity(consumer interface{ Name() string }, id string) inbox.Identity {
	return inbox.Identity{Scope: inbox.Tenant("acme"), Source: "checkout", Consumer: consumer.Name(), MessageID: id}
}

// TestShop is the whole story: typed accepts with redeliveries, one drain, the
// business rows written through the generated Queries.
func TestShop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, client := setup(t)

	created := shop.OrderCreated{OrderID: "o-1", CustomerID: "c-1", TotalCents: 1250}
	createdV2 := shop.OrderCreatedV2{OrderID: "o-2", CustomerID: "c-2", TotalCents: 990, Currency: "USD"}

	// The broker redelivers each event; every copy after the first is a Duplicate.
	for i := range 3 {
		want := inbox.Accepted
		if i > 0 {
			want = inbox.Duplicate
		}
		res, err := shop.AcceptOrderCreated(ctx, client, shop.OrdersProjectionV1, delivery("evt-1"), created)
		is.NoErr(err)
		is.Equal(res.Outcome, want)
		res, err = shop.AcceptOrderCreated(ctx, client, shop.BillingV1, delivery("evt-1"), created)
		is.NoErr(err)
		is.Equal(res.Outcome, want)
		res, err = shop.AcceptOrderCreatedV2(ctx, client, shop.OrdersProjectionV1, delivery("evt-2"), createdV2)
		is.NoErr(err)
		is.Equal(res.Outcome, want)
		res, err = shop.AcceptOrderCreatedV2(ctx, client, shop.BillingV1, delivery("evt-2"), createdV2)
		is.NoErr(err)
		is.Equal(res.Outcome, want)
	}

	// Concurrent copies of one delivery converge on one receipt.
	third := shop.OrderCreated{OrderID: "o-3", CustomerID: "c-3", TotalCents: 100}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[inbox.Outcome]int{}
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := shop.AcceptOrderCreated(ctx, client, shop.OrdersProjectionV1, delivery("evt-3"), third)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			outcomes[res.Outcome]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	is.Equal(outcomes[inbox.Accepted], 1)
	is.Equal(outcomes[inbox.Duplicate], 15)
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := admin.ForTenant("acme").Stats(ctx, inbox.StatsParams{})
	is.NoErr(err)
	pending := 0
	for _, c := range stats.Consumers {
		pending += int(c.Pending)
	}
	is.Equal(pending, 5) // one receipt per consumer and event, whatever the redeliveries

	w := newWorker(t, pool)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 5)

	q := shopdb.New(pool)
	orders, err := q.ListOrders(ctx)
	is.NoErr(err)
	is.Equal(orders, []shopdb.ShopOrder{
		{TenantID: "acme", OrderID: "o-1", CustomerID: "c-1", TotalCents: 1250, Currency: "EUR", Status: "open"},
		{TenantID: "acme", OrderID: "o-2", CustomerID: "c-2", TotalCents: 990, Currency: "USD", Status: "open"},
		{TenantID: "acme", OrderID: "o-3", CustomerID: "c-3", TotalCents: 100, Currency: "EUR", Status: "open"},
	})
	invoices, err := q.ListInvoices(ctx)
	is.NoErr(err)
	is.Equal(invoices, []shopdb.ShopInvoice{
		{TenantID: "acme", OrderID: "o-1", AmountCents: 1250, Currency: "EUR"},
		{TenantID: "acme", OrderID: "o-2", AmountCents: 990, Currency: "USD"},
	})

	// A redelivery after processing is still a Duplicate, reporting COMPLETED,
	// and runs no handler again.
	res, err := shop.AcceptOrderCreated(ctx, client, shop.BillingV1, delivery("evt-1"), created)
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)
	is.Equal(res.Status, inbox.StatusCompleted)
	n, err = w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 0)

	// The same message ID with other content is a conflict, not a new order.
	_, err = shop.AcceptOrderCreated(ctx, client, shop.BillingV1, delivery("evt-1"), shop.OrderCreated{OrderID: "o-1", TotalCents: 1})
	is.True(errors.Is(err, inbox.ErrIdentityConflict))

	// Accept inside the caller's transaction: the receipt commits with it.
	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	res, err = shop.AcceptOrderCancelledTx(ctx, client, tx, shop.OrdersProjectionV1, delivery("evt-4"), shop.OrderCancelled{OrderID: "o-1", Reason: "changed mind"})
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	is.NoErr(tx.Commit(ctx))
	n, err = w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	is.Equal(inboxtest.RequireStatus(t, pool, identity(shop.OrdersProjectionV1, "evt-4"), inbox.StatusCompleted).ID, res.ID)
	orders, err = q.ListOrders(ctx)
	is.NoErr(err)
	is.Equal(orders[0].Status, "cancelled")
}

// Validate runs at accept: an invalid event is rejected with a typed error
// and nothing is stored.
func TestAcceptRunsValidate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, client := setup(t)

	_, err := shop.AcceptOrderCreated(ctx, client, shop.OrdersProjectionV1, delivery("evt-1"), shop.OrderCreated{OrderID: "o-1", TotalCents: -5})
	var verr *inbox.ValidationError
	is.True(errors.As(err, &verr))
	is.Equal(verr.Rule, inbox.RuleValidate)
	is.Equal(verr.Field, "payload")
	is.True(errors.Is(err, inbox.ErrInvalid))
	is.Equal(inbox.ActionFor(err), inbox.ActionReject)

	// A pointer-receiver Validate is found too.
	_, err = shop.AcceptOrderCreatedV2(ctx, client, shop.BillingV1, delivery("evt-2"), shop.OrderCreatedV2{OrderID: "o-2", Currency: "euro"})
	is.True(errors.As(err, &verr))
	is.Equal(verr.Rule, inbox.RuleValidate)

	// A nil consumer is an error, not a panic.
	_, err = shop.AcceptOrderCreated(ctx, client, nil, delivery("evt-3"), shop.OrderCreated{OrderID: "o-3"})
	is.True(errors.As(err, &verr))
	is.Equal(verr.Field, "consumer")

	// Nothing was stored.
	inboxtest.RequireNoReceipt(t, pool, identity(shop.OrdersProjectionV1, "evt-1"))
	inboxtest.RequireNoReceipt(t, pool, identity(shop.BillingV1, "evt-2"))
	inboxtest.RequireNoReceipt(t, pool, identity(shop.OrdersProjectionV1, "evt-3"))
	inboxtest.RequireNoReceipt(t, pool, identity(shop.BillingV1, "evt-3"))
}

// Handling decodes strictly: content that bypassed the typed accept (another
// producer, an older build) and does not fit the Go type goes DEAD, unless
// the event declared unknown=allow.
func TestHandlingDecodesStrictly(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, client := setup(t)

	// A producer outside this codebase writes raw messages, so it spells out
	// the names the generated code keeps for Go callers.
	raw := func(id, consumer, eventType string, payload string) inbox.Identity {
		t.Helper()
		identity := inbox.Identity{Scope: inbox.Tenant("acme"), Source: "legacy", Consumer: consumer, MessageID: id}
		_, err := client.Accept(ctx, inbox.Message{
			Identity:      identity,
			EventType:     eventType,
			SchemaVersion: 1,
			Payload:       []byte(payload),
		})
		is.NoErr(err)
		return identity
	}
	unknownField := raw("m-1", "billing.v1", "order.created", `{"orderId":"o-1","customerId":"c-1","totalCents":5,"coupon":"X"}`)
	invalid := raw("m-2", "billing.v1", "order.created", `{"orderId":"","customerId":"c-2","totalCents":5}`)
	wrongType := raw("m-3", "billing.v1", "order.created", `{"orderId":"o-3","customerId":"c-3","totalCents":"5"}`)
	good := raw("m-4", "orders.projection.v1", "order.created", `{"orderId":"o-4","customerId":"c-4","totalCents":5}`)
	tolerated := raw("m-5", "orders.projection.v1", "order.cancelled", `{"orderId":"o-4","reason":"r","cancelledBy":"ops"}`)

	w := newWorker(t, pool)
	_, err := w.Drain(ctx)
	is.NoErr(err)
	inboxtest.RequireStatus(t, pool, unknownField, inbox.StatusDead)
	inboxtest.RequireStatus(t, pool, invalid, inbox.StatusDead)
	inboxtest.RequireStatus(t, pool, wrongType, inbox.StatusDead)
	inboxtest.RequireStatus(t, pool, good, inbox.StatusCompleted)

	// The cancellation may have run before its order existed: it retries (the
	// handler returns an ordinary error) and completes once the order is there.
	// An operator's requeue makes it due at once instead of after its backoff.
	if r := inboxtest.RequireReceipt(t, pool, tolerated); r.Status != inbox.StatusCompleted {
		is.Equal(r.Status, inbox.StatusRetryable)
		a, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		admin := a.ForTenant("acme")
		got, err := admin.Get(ctx, r.ID)
		is.NoErr(err)
		_, err = admin.Requeue(ctx, r.ID, inbox.ChangeParams{ExpectedVersion: got.Version, Actor: "test", Reason: "order exists now"})
		is.NoErr(err)
		_, err = w.Drain(ctx)
		is.NoErr(err)
		inboxtest.RequireStatus(t, pool, tolerated, inbox.StatusCompleted)
	}

	invoices, err := shopdb.New(pool).ListInvoices(ctx)
	is.NoErr(err)
	is.Equal(len(invoices), 0)
	orders, err := shopdb.New(pool).ListOrders(ctx)
	is.NoErr(err)
	is.Equal(len(orders), 1)
	is.Equal(orders[0].Status, "cancelled")
}

// Registering a consumer twice fails and leaves the registry as it was.
func TestRegisterTwice(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	reg := handler.NewRegistry()
	is.NoErr(shop.RegisterBillingV1(reg, shop.Billing{}))
	err := shop.RegisterBillingV1(reg, shop.Billing{})
	is.True(errors.Is(err, handler.ErrDuplicateHandler))

	// A nil handler registers nothing; OrdersProjectionV1 shares no key with
	// BillingV1, so a real one registers.
	err = shop.RegisterOrdersProjectionV1(reg, nil)
	is.True(errors.Is(err, handler.ErrNilHandler))
	is.Equal(err.Error(), `pginbox: registering consumer "orders.projection.v1": handler is nil: pass an implementation of OrdersProjectionV1Handler`)
	is.True(!reg.HasConsumer(shop.OrdersProjectionV1.Name()))
	is.NoErr(shop.RegisterOrdersProjectionV1(reg, shop.Projection{}))
	is.Equal(reg.Consumers(), shop.ConsumerNames())
}

// A consumer is registered whole or not at all: one of its keys taken by
// another handler keeps the others out too.
func TestRegisterIsAllOrNothing(t *testing.T) {
	is := is.New(t)
	reg := handler.NewRegistry()
	taken := handler.Key{Consumer: "orders.projection.v1", EventType: "order.created", SchemaVersion: 2}
	is.NoErr(reg.Register(taken, func(context.Context, *handler.Msg) error { return nil }))

	err := shop.RegisterOrdersProjectionV1(reg, shop.Projection{})
	is.True(errors.Is(err, handler.ErrDuplicateHandler))
	is.True(strings.Contains(err.Error(), taken.String()))
	for _, k := range []handler.Key{
		{Consumer: "orders.projection.v1", EventType: "order.cancelled", SchemaVersion: 1},
		{Consumer: "orders.projection.v1", EventType: "order.created", SchemaVersion: 1},
	} {
		_, ok := reg.Lookup(k)
		is.True(!ok)
	}
}

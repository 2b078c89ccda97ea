package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

func inboxClient(t testing.TB, pool *pgxpool.Pool, cfg inbox.Config) *inbox.Client {
	t.Helper()
	cfg.Logger = quiet
	c, err := inbox.NewClient(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// An event becomes an inbox message under its own ID: publishing it again
// (a lost mark) is a Duplicate, one receipt.
func TestInboxPublisherDeliversOnceIntoAnotherInbox(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	a, b := inboxtest.Pool(t), inboxtest.Pool(t)
	ev := event("o-1", 1)
	ev.Metadata = map[string]string{"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	id := emit(t, a, ev)[0]
	pub := outbox.InboxPublisher{
		Client: inboxClient(t, b, inbox.Config{}),
		Scope:  func(m outbox.Message) inbox.Scope { return inbox.Tenant(m.Metadata["tenant"]) },
	}
	r := newRelay(t, a, pub, outbox.RelayConfig{})
	is.Equal(drain(t, r), 1)

	identity := inbox.Identity{Scope: inbox.Tenant("acme"), Source: "orders", Consumer: "billing.v1", MessageID: id.String()}
	rec := inboxtest.RequireStatus(t, b, identity, inbox.StatusPending)
	admin, err := inbox.NewAdmin(b, inbox.AdminConfig{Logger: quiet})
	is.NoErr(err)
	got, err := admin.Operator().Get(ctx, rec.ID)
	is.NoErr(err)
	is.Equal(got.EventType, "order.confirmed")
	is.Equal(got.SchemaVersion, 1)
	is.Equal(string(got.Payload), `{"n":1,"orderId":"o-1"}`)
	is.Equal(got.Metadata, ev.Metadata)

	// The relay lost its mark: the event is published again, and the
	// receiving inbox answers Duplicate.
	_, err = a.Exec(ctx, "UPDATE pginbox_outbox SET status = 'PENDING', published_at = NULL WHERE id = $1", id)
	is.NoErr(err)
	is.Equal(drain(t, r), 1)
	var receipts int
	is.NoErr(b.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts").Scan(&receipts))
	is.Equal(receipts, 1)
	is.Equal(row(t, a, id).status, "PUBLISHED")
}

// What the receiving inbox rejects can never be accepted: DEAD at once, with
// the reason. A storage failure is retried.
func TestInboxPublisherFailures(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	a, b := inboxtest.Pool(t), inboxtest.Pool(t)
	client := inboxClient(t, b, inbox.Config{Consumers: []string{"billing.v1"}})
	r := newRelay(t, a, outbox.InboxPublisher{Client: client}, outbox.RelayConfig{Backoff: func(int) time.Duration { return time.Hour }})

	// A consumer the receiving deployment does not declare.
	ev := event("", 1)
	ev.Destination = "biling.v1"
	typo := emit(t, a, ev)[0]
	// The same event ID with other content: an identity conflict.
	ok := emit(t, a, event("", 2))[0]
	is.Equal(drain(t, r), 1)
	s := row(t, a, typo)
	is.Equal(s.status, "DEAD")
	is.True(strings.Contains(s.lastError, "the receiving inbox rejected the event"))
	is.True(strings.Contains(s.lastError, "undeclared_consumer"))
	_, err := a.Exec(ctx, `UPDATE pginbox_outbox SET status = 'PENDING', published_at = NULL, payload = '{"n":3}' WHERE id = $1`, ok)
	is.NoErr(err)
	drain(t, r)
	s = row(t, a, ok)
	is.Equal(s.status, "DEAD")
	is.True(strings.Contains(s.lastError, inbox.CodeIdentityConflict))

	// The receiving database is gone: retry later, not DEAD.
	down := emit(t, a, event("", 4))[0]
	b.Close()
	drain(t, r)
	s = row(t, a, down)
	is.Equal(s.status, "PENDING")
	is.Equal(s.attempts, 1)
	is.True(strings.Contains(s.lastError, "closed pool"))
}

func TestInboxPublisherWithoutClient(t *testing.T) {
	is := is.New(t)
	errs := outbox.InboxPublisher{}.Publish(context.Background(), []outbox.Message{{}, {}})
	is.Equal(len(errs), 2)
	is.True(strings.Contains(errs[1].Error(), "InboxPublisher.Client is nil"))
}

// Consumer maps a destination to the receiving consumer.
func TestInboxPublisherConsumerMapping(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a, b := inboxtest.Pool(t), inboxtest.Pool(t)
	id := emit(t, a, event("", 1))[0]
	pub := outbox.InboxPublisher{
		Client:   inboxClient(t, b, inbox.Config{}),
		Consumer: func(m outbox.Message) string { return "invoicing." + m.Destination },
	}
	is.Equal(drain(t, newRelay(t, a, pub, outbox.RelayConfig{})), 1)
	inboxtest.RequireReceipt(t, b, inbox.Identity{Scope: inbox.Global(), Source: "orders", Consumer: "invoicing.billing.v1", MessageID: id.String()})
}

// An event emitted in a tenant's transaction carries that tenant: the
// relay reads it into Message.Scope, and InboxPublisher delivers into it by
// default. One emitted without a scope is global.
func TestInboxPublisherDefaultsToTheEmittingScope(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	a, b := inboxtest.Pool(t), inboxtest.Pool(t)
	tx, err := a.Begin(ctx)
	is.NoErr(err)
	is.NoErr(inbox.ApplyScope(ctx, tx, inbox.Tenant("acme")))
	scoped, err := outbox.Emit(ctx, tx, event("", 1))
	is.NoErr(err)
	is.NoErr(tx.Commit(ctx))
	global := emit(t, a, event("", 2))[0]

	rec := &recorder{}
	pub := outbox.InboxPublisher{Client: inboxClient(t, b, inbox.Config{})}
	is.Equal(drain(t, newRelay(t, a, tee{rec, pub}, outbox.RelayConfig{})), 2)
	for _, m := range rec.messages() {
		want := inbox.Global()
		if m.ID == scoped {
			want = inbox.Tenant("acme")
		}
		is.Equal(m.Scope, want) // m.ID
	}
	inboxtest.RequireStatus(t, b, inbox.Identity{Scope: inbox.Tenant("acme"), Source: "orders", Consumer: "billing.v1", MessageID: scoped.String()}, inbox.StatusPending)
	inboxtest.RequireStatus(t, b, inbox.Identity{Scope: inbox.Global(), Source: "orders", Consumer: "billing.v1", MessageID: global.String()}, inbox.StatusPending)
}

// tee publishes to both, reporting the second's errors.
type tee struct{ first, second outbox.Publisher }

func (p tee) Publish(ctx context.Context, msgs []outbox.Message) []error {
	p.first.Publish(ctx, msgs)
	return p.second.Publish(ctx, msgs)
}

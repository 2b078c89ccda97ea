package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

func newAdmin(t testing.TB, pool pgxPool) *outbox.Admin {
	t.Helper()
	a, err := outbox.NewAdmin(pool, outbox.AdminConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAdminStats(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	toShipping := func(n int) outbox.Event {
		ev := event("", n)
		ev.Destination = "shipping.v1"
		return ev
	}
	ids := emit(t, pool, event("", 1), event("", 2), event("", 3), toShipping(1))
	r := newRelay(t, pool, &recorder{fail: func(m outbox.Message) error {
		switch m.ID {
		case ids[0]:
			return handler.Permanent(errors.New("no"))
		case ids[1]:
			return errors.New("later")
		}
		return nil
	}}, outbox.RelayConfig{Backoff: func(int) time.Duration { return time.Hour }})
	is.Equal(drain(t, r), 2)
	emit(t, pool, toShipping(2)) // due now

	admin := newAdmin(t, pool)
	st, err := admin.Stats(ctx, outbox.StatsParams{})
	is.NoErr(err)
	is.Equal(st.Dead, int64(1))
	is.True(!st.PublishedCounted)
	is.Equal(len(st.Destinations), 2)
	billing, shipping := st.Destinations[0], st.Destinations[1]
	is.Equal(billing.Destination, "billing.v1")
	is.Equal(billing.Pending, int64(1))  // the one waiting for its retry
	is.Equal(billing.Retrying, int64(1)) // ...which failed before
	is.Equal(billing.Dead, int64(1))
	is.Equal(billing.Due, int64(0))
	is.Equal(billing.OldestDueAge, time.Duration(0))
	is.Equal(billing.Published, int64(0)) // not counted
	is.Equal(shipping.Destination, "shipping.v1")
	is.Equal(shipping.Pending, int64(1))
	is.Equal(shipping.Retrying, int64(0))
	is.Equal(shipping.Due, int64(1))
	is.True(shipping.OldestDueAge >= 0)

	st, err = admin.Stats(ctx, outbox.StatsParams{IncludePublished: true})
	is.NoErr(err)
	is.True(st.PublishedCounted)
	is.Equal(st.Destinations[0].Published, int64(1))
	is.Equal(st.Destinations[1].Published, int64(1))
}

func TestAdminListAndGet(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	ids := emit(t, pool, event("A", 1), event("B", 1), event("A", 2), event("", 1), event("A", 3))
	admin := newAdmin(t, pool)

	page, err := admin.List(ctx, outbox.ListParams{Limit: 2})
	is.NoErr(err)
	is.Equal(len(page.Events), 2)
	is.Equal(page.Events[0].ID, ids[0])
	is.Equal(page.Next, ids[1])
	is.Equal(page.Events[0].Payload, nil) // List leaves payloads out
	page, err = admin.List(ctx, outbox.ListParams{Limit: 2, After: page.Next})
	is.NoErr(err)
	is.Equal(page.Events[0].ID, ids[2])
	page, err = admin.List(ctx, outbox.ListParams{Limit: 2, After: page.Next})
	is.NoErr(err)
	is.Equal(len(page.Events), 1)
	is.True(page.Next.IsZero()) // the last page

	page, err = admin.List(ctx, outbox.ListParams{OrderingKey: "A", Statuses: []outbox.Status{outbox.StatusPending}})
	is.NoErr(err)
	is.Equal(len(page.Events), 3)
	is.True(page.Events[0].Seq < page.Events[1].Seq && page.Events[1].Seq < page.Events[2].Seq)
	page, err = admin.List(ctx, outbox.ListParams{Destination: "nowhere"})
	is.NoErr(err)
	is.Equal(len(page.Events), 0)

	_, err = admin.List(ctx, outbox.ListParams{Limit: outbox.MaxListLimit + 1})
	is.True(errors.Is(err, inbox.ErrInvalid))
	_, err = admin.List(ctx, outbox.ListParams{Statuses: []outbox.Status{"DONE"}})
	var ve *inbox.ValidationError
	is.True(errors.As(err, &ve))
	is.Equal(ve.Field, "status")

	ev, err := admin.Get(ctx, ids[1])
	is.NoErr(err)
	is.Equal(ev.OrderingKey, "B")
	is.Equal(ev.Status, outbox.StatusPending)
	is.Equal(ev.Version, int64(1))
	is.Equal(string(ev.Payload), `{"n":1,"orderId":"B"}`)
	_, err = admin.Get(ctx, outbox.ID{9})
	is.True(errors.Is(err, outbox.ErrNotFound))
}

// Purge deletes only PUBLISHED events past the cutoff, in batches.
func TestAdminPurge(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	var evs []outbox.Event
	for i := range 5 {
		evs = append(evs, event("", i))
	}
	ids := emit(t, pool, evs...)
	_, err := pool.Exec(ctx, `UPDATE pginbox_outbox SET status = 'PUBLISHED', published_at = now() - interval '3 days' WHERE id = ANY($1)`, ids[:3])
	is.NoErr(err)
	_, err = pool.Exec(ctx, `UPDATE pginbox_outbox SET status = 'DEAD', updated_at = now() - interval '3 days' WHERE id = $1`, ids[3])
	is.NoErr(err)
	admin := newAdmin(t, pool)

	n, cutoff, err := admin.PurgeCount(ctx, outbox.PurgeParams{OlderThan: 48 * time.Hour})
	is.NoErr(err)
	is.Equal(n, int64(3))
	is.True(time.Since(cutoff) > 47*time.Hour)
	var batches []int64
	res, err := admin.Purge(ctx, outbox.PurgeParams{OlderThan: 48 * time.Hour, BatchSize: 2, Progress: func(d int64) { batches = append(batches, d) }})
	is.NoErr(err)
	is.Equal(res.Deleted, int64(3))
	is.Equal(batches, []int64{2, 3})
	is.Equal(count(t, pool, "true"), 2) // the DEAD and the PENDING event stay

	_, err = admin.Purge(ctx, outbox.PurgeParams{})
	is.True(errors.Is(err, inbox.ErrInvalid))
	_, _, err = admin.PurgeCount(ctx, outbox.PurgeParams{OlderThan: time.Hour, BatchSize: -1})
	is.True(errors.Is(err, inbox.ErrInvalid))
	_, err = outbox.NewAdmin(nil, outbox.AdminConfig{})
	is.True(err != nil)
}

// A filter PostgreSQL cannot compare (invalid UTF-8, a NUL byte) is the
// caller's mistake: a ValidationError naming the field, not a database error.
func TestAdminListRejectsBadFilterBytes(t *testing.T) {
	t.Parallel()
	pool := inboxtest.Pool(t)
	admin := newAdmin(t, pool)
	for _, p := range []outbox.ListParams{
		{Destination: "orders\xff\xfe"},
		{OrderingKey: "a\x00b"},
	} {
		_, err := admin.List(context.Background(), p)
		var ve *inbox.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("List(%+v) = %v, want a *inbox.ValidationError", p, err)
		}
		want := "destination"
		if p.OrderingKey != "" {
			want = "ordering_key"
		}
		if ve.Field != want {
			t.Errorf("List(%+v): field %q, want %q", p, ve.Field, want)
		}
	}
}

// An Admin for one scope (ForScope) reads and requeues that scope's events
// only: another scope's event is ErrNotFound, and an invalid scope is a
// validation error. On one server as on Citus (TestCitusAdminGetAndRequeue).
func TestAdminForScope(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	id := emitAs(t, pool, "tenant-a", event("", 1))[0]
	global := emit(t, pool, event("", 2))[0]
	drain(t, newRelay(t, pool, &recorder{fail: func(outbox.Message) error { return handler.Permanent(errors.New("no")) }}, outbox.RelayConfig{}))
	admin := newAdmin(t, pool)

	ev, err := admin.ForScope(inbox.Tenant("tenant-a")).Get(ctx, id)
	is.NoErr(err)
	is.Equal(ev.Status, outbox.StatusDead)
	_, err = admin.ForScope(inbox.Tenant("tenant-b")).Get(ctx, id)
	is.True(errors.Is(err, outbox.ErrNotFound))
	_, err = admin.ForScope(inbox.Global()).Get(ctx, id)
	is.True(errors.Is(err, outbox.ErrNotFound))
	_, err = admin.ForScope(inbox.Tenant("tenant-b")).Requeue(ctx, id, ev.Version)
	is.True(errors.Is(err, outbox.ErrNotFound))
	is.Equal(row(t, pool, id).status, "DEAD") // unchanged

	res, err := admin.ForScope(inbox.Tenant("tenant-a")).Requeue(ctx, id, ev.Version)
	is.NoErr(err)
	is.Equal(res.Version, ev.Version+1)
	is.Equal(row(t, pool, id).status, "PENDING")

	g, err := admin.ForScope(inbox.Global()).Get(ctx, global)
	is.NoErr(err)
	_, err = admin.ForScope(inbox.Global()).Requeue(ctx, global, g.Version)
	is.NoErr(err)

	var verr *inbox.ValidationError
	_, err = admin.ForScope(inbox.Scope{Kind: inbox.ScopeGlobal, ID: "x"}).Get(ctx, id)
	is.True(errors.As(err, &verr))
	_, err = admin.ForScope(inbox.Tenant("")).Requeue(ctx, id, 1)
	is.True(errors.As(err, &verr))
}

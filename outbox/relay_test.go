package outbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
)

func TestRelayPublishesAndMarks(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool := inboxtest.Pool(t)
	ev := event("o-1", 1)
	ev.Metadata = map[string]string{"k": "v"}
	ids := emit(t, pool, ev, event("", 2))
	rec := &recorder{}
	r := newRelay(t, pool, rec, outbox.RelayConfig{})

	is.Equal(drain(t, r), 2)
	msgs := rec.messages()
	is.Equal(len(msgs), 2)
	is.Equal(msgs[0].ID, ids[0]) // emit order
	is.Equal(msgs[0].Source, "orders")
	is.Equal(msgs[0].Destination, "billing.v1")
	is.Equal(msgs[0].OrderingKey, "o-1")
	is.Equal(msgs[0].EventType, "order.confirmed")
	is.Equal(msgs[0].SchemaVersion, 1)
	is.Equal(string(msgs[0].Payload), `{"n":1,"orderId":"o-1"}`)
	is.Equal(msgs[0].Metadata, map[string]string{"k": "v"})
	is.Equal(msgs[0].Attempt, 1)
	is.True(!msgs[0].EmittedAt.IsZero())
	is.Equal(msgs[1].Metadata, nil)
	is.Equal(count(t, pool, "status = 'PUBLISHED' AND published_at IS NOT NULL AND claim_token IS NULL"), 2)

	is.Equal(drain(t, r), 0) // nothing twice
	is.Equal(len(rec.messages()), 2)
}

// A failed publish is retried after a backoff persisted in the row; the
// retry budget spent, the event is DEAD with its last error.
func TestRelayRetriesWithPersistedBackoffThenDead(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	id := emit(t, pool, event("", 1))[0]
	rec := &recorder{fail: func(outbox.Message) error { return errors.New("broker unavailable") }}
	var attempts []int
	r := newRelay(t, pool, rec, outbox.RelayConfig{MaxAttempts: 3, Backoff: func(a int) time.Duration {
		attempts = append(attempts, a)
		return time.Hour
	}})

	is.Equal(drain(t, r), 0)
	s := row(t, pool, id)
	is.Equal(s.status, "PENDING")
	is.Equal(s.attempts, 1)
	is.Equal(s.lastError, "broker unavailable")
	is.True(!s.due)                                                                             // waits for its retry
	is.Equal(count(t, pool, "id = $1 AND available_at > now() + interval '59 minutes'", id), 1) // the backoff is in the row
	is.Equal(drain(t, r), 0)                                                                    // not due: not attempted
	is.Equal(len(rec.messages()), 1)

	for range 2 {
		_, err := pool.Exec(ctx, "UPDATE pginbox_outbox SET available_at = now()")
		is.NoErr(err)
		is.Equal(drain(t, r), 0)
	}
	s = row(t, pool, id)
	is.Equal(s.status, "DEAD")
	is.Equal(s.attempts, 3)
	is.Equal(s.lastError, "broker unavailable")
	is.Equal(attempts, []int{1, 2}) // the third failure spent the budget: no backoff asked
	msgs := rec.messages()
	is.Equal(len(msgs), 3)
	is.Equal(msgs[2].Attempt, 3)
}

func TestRelayPermanentErrorIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool := inboxtest.Pool(t)
	id := emit(t, pool, event("", 1))[0]
	r := newRelay(t, pool, &recorder{fail: func(outbox.Message) error {
		return handler.Permanent(errors.New("topic does not exist"))
	}}, outbox.RelayConfig{})
	drain(t, r)
	s := row(t, pool, id)
	is.Equal(s.status, "DEAD")
	is.Equal(s.attempts, 1)
	is.Equal(s.lastError, "topic does not exist")
}

// A DEAD event is requeued at the version the operator saw, and published.
func TestAdminRequeueDead(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	dead, published := emit(t, pool, event("", 1))[0], emit(t, pool, event("", 2))[0]
	var broken atomic.Bool
	broken.Store(true)
	rec := &recorder{fail: func(m outbox.Message) error {
		if m.ID == dead && broken.Load() {
			return handler.Permanent(errors.New("schema registry refused the payload"))
		}
		return nil
	}}
	r := newRelay(t, pool, rec, outbox.RelayConfig{})
	is.Equal(drain(t, r), 1)
	admin, err := outbox.NewAdmin(pool, outbox.AdminConfig{Logger: quiet})
	is.NoErr(err)
	ev, err := admin.Get(ctx, dead)
	is.NoErr(err)
	is.Equal(ev.Status, outbox.StatusDead)

	_, err = admin.Requeue(ctx, dead, ev.Version+1)
	is.True(errors.Is(err, outbox.ErrVersionConflict))
	is.True(strings.Contains(err.Error(), "retry with version"))
	pub, err := admin.Get(ctx, published)
	is.NoErr(err)
	_, err = admin.Requeue(ctx, published, pub.Version)
	is.True(errors.Is(err, outbox.ErrWrongState))
	is.True(strings.Contains(err.Error(), "it is PUBLISHED, requeue needs DEAD"))
	_, err = admin.Requeue(ctx, outbox.ID{1}, 1)
	is.True(errors.Is(err, outbox.ErrNotFound))
	_, err = admin.Requeue(ctx, dead, 0)
	is.True(errors.Is(err, inbox.ErrInvalid))
	is.Equal(row(t, pool, dead).status, "DEAD") // refusals changed nothing

	broken.Store(false)
	res, err := admin.Requeue(ctx, dead, ev.Version)
	is.NoErr(err)
	is.Equal(res.Version, ev.Version+1)
	s := row(t, pool, dead)
	is.Equal(s.status, "PENDING")
	is.Equal(s.attempts, 0)
	is.True(s.due)
	is.Equal(drain(t, r), 1)
	is.Equal(row(t, pool, dead).status, "PUBLISHED")
}

// Per key, a failing event holds back the later ones until it is published
// or DEAD; other keys and unordered events go on.
func TestRelayFailedEventBlocksItsKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	a := emit(t, pool, event("A", 1), event("A", 2), event("B", 1), event("A", 3), event("", 1))
	var failA1 atomic.Bool
	failA1.Store(true)
	rec := &recorder{fail: func(m outbox.Message) error {
		if m.ID == a[0] && failA1.Load() {
			return errors.New("timeout")
		}
		return nil
	}}
	r := newRelay(t, pool, rec, outbox.RelayConfig{MaxAttempts: 2, Backoff: func(int) time.Duration { return time.Hour }})

	is.Equal(drain(t, r), 2) // B and the unordered one
	is.Equal(row(t, pool, a[0]).status, "PENDING")
	for _, id := range []int{1, 3} {
		s := row(t, pool, a[id])
		is.Equal(s.status, "PENDING")
		is.Equal(s.attempts, 0) // never attempted while A1 waits
	}
	for _, m := range rec.messages() {
		is.True(m.ID != a[1] && m.ID != a[3]) // nothing after A1 was sent
	}

	// A1's retry succeeds: A2 and A3 follow, in order.
	failA1.Store(false)
	_, err := pool.Exec(ctx, "UPDATE pginbox_outbox SET available_at = now() WHERE id = $1", a[0])
	is.NoErr(err)
	is.Equal(drain(t, r), 3)
	got := rec.published()
	is.Equal(got[len(got)-3:], []outbox.ID{a[0], a[1], a[3]})
}

// A DEAD event no longer holds its key back.
func TestRelayDeadEventReleasesItsKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool := inboxtest.Pool(t)
	a := emit(t, pool, event("A", 1), event("A", 2))
	rec := &recorder{fail: func(m outbox.Message) error {
		if m.ID == a[0] {
			return handler.Permanent(errors.New("poison"))
		}
		return nil
	}}
	r := newRelay(t, pool, rec, outbox.RelayConfig{})
	is.Equal(drain(t, r), 1)
	is.Equal(row(t, pool, a[0]).status, "DEAD")
	is.Equal(row(t, pool, a[1]).status, "PUBLISHED")
	is.Equal(rec.published(), []outbox.ID{a[1]})
}

// Several events of one key in one batch go out one per Publish call, in
// emit order, and an event is sent only after the one before it succeeded.
func TestRelayPublishesAKeysBatchInRounds(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool := inboxtest.Pool(t)
	a := emit(t, pool, event("A", 1), event("A", 2), event("A", 3), event("B", 1), event("B", 2), event("", 1))
	rec := &recorder{fail: func(m outbox.Message) error {
		if m.ID == a[4] {
			return errors.New("B2 fails")
		}
		return nil
	}}
	r := newRelay(t, pool, rec, outbox.RelayConfig{Backoff: func(int) time.Duration { return time.Hour }})
	is.Equal(drain(t, r), 5)
	rec.mu.Lock()
	calls := rec.calls
	rec.mu.Unlock()
	is.Equal(len(calls), 3)
	is.Equal(ids(calls[0]), ids([]outbox.Message{{OrderingKey: "A", ID: a[0]}, {OrderingKey: "B", ID: a[3]}, {ID: a[5]}}))
	is.Equal(ids(calls[1]), ids([]outbox.Message{{OrderingKey: "A", ID: a[1]}, {OrderingKey: "B", ID: a[4]}}))
	is.Equal(ids(calls[2]), ids([]outbox.Message{{OrderingKey: "A", ID: a[2]}}))
}

// A Publisher that breaks its contract fails the batch's events (retried
// later) instead of the relay.
func TestRelaySurvivesABrokenPublisher(t *testing.T) {
	t.Parallel()
	pool := inboxtest.Pool(t)
	for _, tc := range []struct {
		name string
		pub  outbox.Publisher
		want string
	}{
		{"wrong result count", publisherFunc(func(context.Context, []outbox.Message) []error { return []error{nil, nil, nil} }),
			"publisher returned 3 results for 1 messages"},
		{"panic", publisherFunc(func(context.Context, []outbox.Message) []error { panic("boom") }),
			"publisher panicked: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			id := emit(t, pool, event("", 1))[0]
			r := newRelay(t, pool, tc.pub, outbox.RelayConfig{Backoff: func(int) time.Duration { return time.Hour }})
			is.Equal(drain(t, r), 0)
			s := row(t, pool, id)
			is.Equal(s.status, "PENDING")
			is.True(strings.HasPrefix(s.lastError, tc.want))
		})
	}
}

type publisherFunc func(context.Context, []outbox.Message) []error

func (f publisherFunc) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return f(ctx, msgs)
}

func TestPublishFunc(t *testing.T) {
	is := is.New(t)
	var got []string
	f := outbox.PublishFunc(func(_ context.Context, m outbox.Message) error {
		got = append(got, m.EventType)
		if m.EventType == "b" {
			return errors.New("no")
		}
		return nil
	})
	is.Equal(f.Publish(context.Background(), []outbox.Message{{EventType: "a"}}), nil)
	errs := f.Publish(context.Background(), []outbox.Message{{EventType: "a"}, {EventType: "b"}})
	is.Equal(len(errs), 2)
	is.NoErr(errs[0])
	is.Equal(errs[1].Error(), "no")
	is.Equal(got, []string{"a", "a", "b"})
}

// A started relay wakes on Emit's notification: with an hour between polls,
// only LISTEN can make it publish. The listener wakes the loop once when it
// subscribes; of three events emitted one after the other after that, at
// least two are found only because of a notification.
func TestRelayWakesOnNotify(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	r := newRelay(t, pool, &recorder{}, outbox.RelayConfig{PollInterval: time.Hour})
	listening := make(chan struct{})
	outbox.SetListening(r, func() { close(listening) })
	is.NoErr(r.Start(ctx))
	defer r.Stop(ctx)
	<-listening
	for i := range 3 {
		id := emit(t, pool, event("", i))[0]
		testkit.Eventually(t, 10*time.Second, func() bool { return row(t, pool, id).status == "PUBLISHED" }, "the notified relay to publish")
	}
}

// Without LISTEN (PgBouncer in transaction mode) polling finds the events.
func TestRelayPollOnly(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	r := newRelay(t, pool, &recorder{}, outbox.RelayConfig{PollOnly: true, PollInterval: 20 * time.Millisecond})
	is.NoErr(r.Start(ctx))
	defer r.Stop(ctx)
	id := emit(t, pool, event("", 1))[0]
	testkit.Eventually(t, 10*time.Second, func() bool { return row(t, pool, id).status == "PUBLISHED" }, "the polling relay to publish")
	var listening int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'").Scan(&listening))
	is.Equal(listening, 0)
}

// Stop cancels a publish that outlives the grace period and releases its
// events without spending their attempt.
func TestRelayStopReleasesTheBatchInFlight(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	id := emit(t, pool, event("A", 1))[0]
	entered := make(chan struct{})
	var once sync.Once
	var cause error
	pub := publisherFunc(func(ctx context.Context, msgs []outbox.Message) []error {
		once.Do(func() { close(entered) })
		<-ctx.Done()
		cause = context.Cause(ctx)
		return []error{ctx.Err()}
	})
	r := newRelay(t, pool, pub, outbox.RelayConfig{ShutdownGrace: 50 * time.Millisecond, Lease: time.Hour})
	is.NoErr(r.Start(ctx))
	<-entered
	is.Equal(row(t, pool, id).status, "PUBLISHING")
	is.NoErr(r.Stop(ctx))
	is.True(cause != nil)
	s := row(t, pool, id)
	is.Equal(s.status, "PENDING")
	is.Equal(s.attempts, 0) // released, not failed
	is.True(s.due)
	is.NoErr(r.Stop(ctx)) // idempotent
}

// Expired leases return to PENDING (or DEAD with the budget spent).
func TestRelayRecoversExpiredLeases(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	ids := emit(t, pool, event("", 1), event("", 2))
	_, err := pool.Exec(ctx, `UPDATE pginbox_outbox SET status = 'PUBLISHING', claim_token = gen_random_uuid(),
		lease_expires_at = now() - interval '1 second', attempts = CASE WHEN id = $1 THEN 1 ELSE 3 END`, ids[0])
	is.NoErr(err)
	r := newRelay(t, pool, &recorder{}, outbox.RelayConfig{MaxAttempts: 3})
	n, err := r.RecoverExpired(ctx)
	is.NoErr(err)
	is.Equal(n, 2)
	s := row(t, pool, ids[0])
	is.Equal(s.status, "PENDING")
	is.True(strings.HasPrefix(s.lastError, "lease expired"))
	is.Equal(row(t, pool, ids[1]).status, "DEAD")
	is.Equal(drain(t, r), 1)
}

// A running relay deletes published events past retention, and only those.
func TestRelayDeletesPublishedPastRetention(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	ids := emit(t, pool, event("", 1), event("", 2), event("", 3))
	_, err := pool.Exec(ctx, `UPDATE pginbox_outbox SET status = 'PUBLISHED', published_at = now() - interval '2 hours' WHERE id = $1;`, ids[0])
	is.NoErr(err)
	_, err = pool.Exec(ctx, `UPDATE pginbox_outbox SET status = 'DEAD', updated_at = now() - interval '2 hours' WHERE id = $1;`, ids[1])
	is.NoErr(err)
	r := newRelay(t, pool, &recorder{}, outbox.RelayConfig{Retention: time.Hour, PollOnly: true})
	is.NoErr(r.Start(ctx))
	defer r.Stop(ctx)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(t, pool, "id = $1", ids[0]) == 0 }, "the old published event to be deleted")
	testkit.Eventually(t, 10*time.Second, func() bool { return row(t, pool, ids[2]).status == "PUBLISHED" }, "the new event to be published")
	is.Equal(row(t, pool, ids[1]).status, "DEAD") // DEAD events are never deleted
}

func TestNewRelayRefusesBadConfig(t *testing.T) {
	pool := inboxtest.Pool(t)
	for _, tc := range []struct {
		cfg   outbox.RelayConfig
		field string
		want  string
	}{
		{outbox.RelayConfig{BatchSize: -1}, "RelayConfig.BatchSize", "must be between 1 and 10000"},
		{outbox.RelayConfig{MaxAttempts: -1}, "RelayConfig.MaxAttempts", "must be between 1 and"},
		{outbox.RelayConfig{Lease: 50 * time.Millisecond}, "RelayConfig.Lease", "must be between 100ms and 24h0m0s"},
		{outbox.RelayConfig{PollInterval: -time.Second}, "RelayConfig.PollInterval", "must not be negative"},
		{outbox.RelayConfig{PollInterval: 2 * time.Hour}, "RelayConfig.PollInterval", "at most 1h"},
		{outbox.RelayConfig{Lease: time.Second, PublishTimeout: 600 * time.Millisecond}, "RelayConfig.PublishTimeout", "at most half the Lease"},
		{outbox.RelayConfig{Retention: 36501 * 24 * time.Hour}, "RelayConfig.Retention", "100 years"},
		{outbox.RelayConfig{ShutdownGrace: -1}, "RelayConfig.ShutdownGrace", "must not be negative"},
	} {
		_, err := outbox.NewRelay(pool, &recorder{}, tc.cfg)
		var ce *inbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("%+v: got %v; want a ConfigError on %s saying %q", tc.cfg, err, tc.field, tc.want)
		}
	}
	is := is.New(t)
	_, err := outbox.NewRelay(nil, &recorder{}, outbox.RelayConfig{})
	is.True(strings.Contains(err.Error(), "pool is nil"))
	_, err = outbox.NewRelay(pool, nil, outbox.RelayConfig{})
	is.True(strings.Contains(err.Error(), "publisher is nil"))
	small := inboxtest.Pool(t, func(c *pgxpoolConfig) { c.MaxConns = 2 })
	_, err = outbox.NewRelay(small, &recorder{}, outbox.RelayConfig{PollOnly: true})
	is.NoErr(err) // without LISTEN two are enough
	tiny := inboxtest.Pool(t, func(c *pgxpoolConfig) { c.MaxConns = 1 })
	for _, tc := range []struct {
		pool             *pgxpool.Pool
		cfg              outbox.RelayConfig
		want, mustNotSay string
	}{
		{small, outbox.RelayConfig{}, "pool MaxConns 2 is below the 3 connections a relay holds (claims and marks, maintenance, LISTEN)", ""},
		{tiny, outbox.RelayConfig{PollOnly: true}, "pool MaxConns 1 is below the 2 connections a relay holds (claims and marks, maintenance)", "LISTEN"},
	} {
		_, err := outbox.NewRelay(tc.pool, &recorder{}, tc.cfg)
		var ce *inbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != "pgxpool.Config.MaxConns" || !strings.Contains(err.Error(), tc.want) ||
			(tc.mustNotSay != "" && strings.Contains(err.Error(), tc.mustNotSay)) {
			t.Errorf("%+v: got %v; want a ConfigError on pgxpool.Config.MaxConns saying %q", tc.cfg, err, tc.want)
		}
	}
}

// Start refuses a database without the outbox schema, and Drain a started
// relay.
func TestRelayStartChecksTheSchema(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	empty := poolOn(t, inboxtest.EmptyDatabase(t))
	r := newRelay(t, empty, &recorder{}, outbox.RelayConfig{})
	err := r.Start(ctx)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "run `inbox migrate up`"))

	pool := inboxtest.Pool(t)
	r = newRelay(t, pool, &recorder{}, outbox.RelayConfig{})
	is.NoErr(r.Start(ctx))
	defer r.Stop(ctx)
	_, err = r.Drain(ctx)
	is.True(strings.Contains(err.Error(), "Drain is for a relay that was not started"))
	is.True(strings.Contains(r.Start(ctx).Error(), "already started"))
}

// A retried event comes due after the later events of its key that waited
// for it. Those must not fill the batch and crowd it out (which would stall
// the key and every event behind them): the claim takes the retried event.
func TestRelayRetriedEventIsNotCrowdedOutByItsKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool := inboxtest.Pool(t)
	a := emit(t, pool, event("A", 1), event("A", 2), event("A", 3))
	u := emit(t, pool, event("", 1))[0]
	rec := &recorder{fail: func(m outbox.Message) error {
		if m.ID == a[0] && m.Attempt == 1 {
			return errors.New("first try fails")
		}
		return nil
	}}
	// Retried at once: due right away, but after A2 and A3 in due order.
	r := newRelay(t, pool, rec, outbox.RelayConfig{BatchSize: 2, Backoff: func(int) time.Duration { return 0 }})
	is.Equal(drain(t, r), 4)
	is.Equal(rec.published(), []outbox.ID{a[0], u, a[1], a[2]}) // A1's retry went out with U, in emit order
}

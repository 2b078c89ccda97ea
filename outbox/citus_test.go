package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/citustest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
)

// citusPool connects to dsn with Citus logging every command it sends to
// the workers.
func citusPool(t *testing.T, dsn string) (*pgxpool.Pool, *citustest.RemoteCommands) {
	t.Helper()
	return citustest.Pool(t, dsn)
}

// nodeOf returns the port of the worker holding tenant's outbox shard.
func nodeOf(t *testing.T, pool *pgxpool.Pool, tenant string) int {
	t.Helper()
	return citustest.NodeOf(t, pool, "pginbox_outbox", tenant)
}

// twoTenants returns two tenants whose shards are on different workers.
func twoTenants(t *testing.T, pool *pgxpool.Pool) (string, string) {
	t.Helper()
	a := "tenant-a"
	for i := range 100 {
		b := fmt.Sprintf("tenant-%d", i)
		if nodeOf(t, pool, b) != nodeOf(t, pool, a) {
			return a, b
		}
	}
	t.Fatal("no tenant found on the other worker")
	return "", ""
}

// emitAs commits one transaction of tenant's scope emitting evs.
func emitAs(t testing.TB, pool *pgxpool.Pool, tenant string, evs ...outbox.Event) []outbox.ID {
	t.Helper()
	var ids []outbox.ID
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		ids = ids[:0]
		if err := inbox.ApplyScope(context.Background(), tx, inbox.Tenant(tenant)); err != nil {
			return err
		}
		for _, ev := range evs {
			id, err := outbox.Emit(context.Background(), tx, ev)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// On Citus, events emitted for two tenants whose shards are on different
// workers are inserted on their tenant's node, and a relay claims, publishes
// and marks them all, every claim and mark routed to the event's node, with
// no two-phase commit. An event a handler emits is linked to its receipt.
func TestCitusEmitAndRelayTwoTenants(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, rc := citusPool(t, inboxtest.CitusDatabase(t))
	a, b := twoTenants(t, pool)

	want := map[outbox.ID]string{}
	for _, tenant := range []string{a, b} {
		for i := range 3 {
			for _, id := range emitAs(t, pool, tenant, event("", i), event(tenant+"-key", i)) {
				want[id] = tenant
			}
		}
	}
	// A handler's emit in a's scope, linked to the receipt it handles.
	reg := handler.NewRegistry()
	var handled outbox.ID
	is.NoErr(reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			id, err := outbox.Emit(ctx, m.Tx, event("", 9))
			handled = id
			return err
		}))
	client, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	res, err := client.Accept(ctx, inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Tenant(a), Source: "shop", Consumer: "orders", MessageID: "m-1"},
		EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
	})
	is.NoErr(err)
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"orders"}, Logger: quiet})
	is.NoErr(err)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	want[handled] = a
	var receipt outbox.ID
	is.NoErr(pool.QueryRow(ctx, "SELECT receipt_id FROM pginbox_outbox WHERE id = $1", handled).Scan(&receipt))
	is.Equal(receipt, res.ID)

	// Each insert went to its tenant's node.
	for _, tenant := range []string{a, b} {
		node := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, tenant))
		inserts := rc.Matching("INSERT INTO public.pginbox_outbox_", "'"+tenant+"'")
		is.True(len(inserts) > 0)
		for _, l := range inserts {
			if !strings.Contains(l, node) {
				t.Errorf("%s's event was inserted on another node than its shard's (%s): %s", tenant, node, l)
			}
		}
	}

	rc.Reset()
	pub := &recorder{}
	r := newRelay(t, pool, pub, outbox.RelayConfig{})
	published := drain(t, r)
	is.Equal(published, len(want))
	for _, m := range pub.messages() {
		tenant, ok := want[m.ID]
		is.True(ok)
		is.Equal(m.Scope, inbox.Tenant(tenant))
	}
	is.Equal(count(t, pool, "status = 'PUBLISHED'"), len(want))
	is.Equal(len(rc.Matching("PREPARE TRANSACTION")), 0)
	for _, tenant := range []string{a, b} {
		node := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, tenant))
		updates := rc.Matching("UPDATE public.pginbox_outbox_", "'"+tenant+"'")
		is.True(len(updates) >= 2) // the claim and the mark
		for _, l := range updates {
			if !strings.Contains(l, node) {
				t.Errorf("%s's claim or mark ran on another node than its shard's (%s): %s", tenant, node, l)
			}
		}
	}
}

// On Citus the key lock of an emit is taken on the scope's node: a second
// emit of the same key in the same scope waits for the first transaction,
// while the same key in another scope (another node) does not.
func TestCitusEmitKeyLockPerScope(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := citusPool(t, inboxtest.CitusDatabase(t))
	a, b := twoTenants(t, pool)

	holder, err := pool.Begin(ctx)
	is.NoErr(err)
	defer holder.Rollback(ctx)
	is.NoErr(inbox.ApplyScope(ctx, holder, inbox.Tenant(a)))
	_, err = outbox.Emit(ctx, holder, event("k", 1))
	is.NoErr(err)

	emitFor := func(ctx context.Context, tenant string) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := inbox.ApplyScope(ctx, tx, inbox.Tenant(tenant)); err != nil {
				return err
			}
			_, err := outbox.Emit(ctx, tx, event("k", 2))
			return err
		})
	}
	waiting := make(chan error, 1)
	go func() { waiting <- emitFor(ctx, a) }() // the same scope and key: waits for holder
	is.NoErr(emitFor(ctx, b))                  // another scope: not blocked
	select {
	case err := <-waiting:
		t.Fatalf("an emit of the same scope and key did not wait for the open transaction holding the key (err %v)", err)
	case <-time.After(time.Second):
	}
	is.NoErr(holder.Commit(ctx))
	is.NoErr(<-waiting)
	is.Equal(count(t, pool, "ordering_key = 'k'"), 3)
}

// On Citus, relays publish the events of two tenants (on different nodes)
// that concurrent transactions emit over a few ordering keys per tenant,
// while publishes fail at random: each key's events are attempted in emit
// order, no key is in two publishes at once, and each event is published
// once or DEAD.
func TestCitusRelaysKeepOrder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.CitusDatabase(t)
	emitPool, _ := citusPool(t, dsn)
	tenantA, tenantB := twoTenants(t, emitPool)
	tenants := []string{tenantA, tenantB}
	const (
		relays      = 2
		emitters    = 3
		txPerEmit   = 12
		maxAttempts = 3
	)
	checker := &orderChecker{rnd: rand.New(rand.NewPCG(3, 4)), inflight: map[string]bool{}}
	cfg := outbox.RelayConfig{BatchSize: 8, PollInterval: 20 * time.Millisecond, MaxAttempts: maxAttempts,
		Backoff: func(int) time.Duration { return 5 * time.Millisecond }, Logger: quiet}
	var started []*outbox.Relay
	for range relays {
		r := newRelay(t, poolOn(t, dsn), checker, cfg)
		is.NoErr(r.Start(ctx))
		started = append(started, r)
	}
	var wg sync.WaitGroup
	var emitMu sync.Mutex
	poison := map[outbox.ID]bool{}
	total := 0
	for e := range emitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(e), 9))
			for n := range txPerEmit {
				tenant := tenants[rnd.IntN(2)]
				// Keys are named per tenant: on Citus an ordering key orders
				// one scope's events, and the checker keys by name.
				ev := event(fmt.Sprintf("%s-key-%d", tenant, rnd.IntN(3)), n)
				if rnd.IntN(30) == 0 {
					ev.Metadata = map[string]string{"poison": "1"}
				}
				var id outbox.ID
				err := pgx.BeginFunc(ctx, emitPool, func(tx pgx.Tx) error {
					if err := inbox.ApplyScope(ctx, tx, inbox.Tenant(tenant)); err != nil {
						return err
					}
					var err error
					id, err = outbox.Emit(ctx, tx, ev)
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				emitMu.Lock()
				total++
				poison[id] = ev.Metadata["poison"] != ""
				emitMu.Unlock()
			}
		}()
	}
	wg.Wait()
	testkit.Eventually(t, 2*time.Minute, func() bool {
		return count(t, emitPool, "status IN ('PENDING', 'PUBLISHING')") == 0
	}, "every event to be PUBLISHED or DEAD")
	for _, r := range started {
		is.NoErr(r.Stop(ctx))
	}
	checkOrder(t, emitPool, checker, poison, total, maxAttempts, relays)
}

// On Citus the outbox Admin reads and requeues an event with a scope (routed
// to the scope's node) and without one (Get reads every shard; Requeue reads
// the event's scope first, then updates on its node). A view of another
// scope does not see the event.
func TestCitusAdminGetAndRequeue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, rc := citusPool(t, inboxtest.CitusDatabase(t))
	a, b := twoTenants(t, pool)
	ids := emitAs(t, pool, a, event("", 1), event("", 2))
	pub := &recorder{fail: func(outbox.Message) error { return handler.Permanent(errors.New("rejected")) }}
	drain(t, newRelay(t, pool, pub, outbox.RelayConfig{}))
	is.Equal(count(t, pool, "status = 'DEAD'"), 2)

	admin, err := outbox.NewAdmin(pool, outbox.AdminConfig{Logger: quiet})
	is.NoErr(err)
	node := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, a))

	// Without a scope.
	ev, err := admin.Get(ctx, ids[0])
	is.NoErr(err)
	is.Equal(ev.Status, outbox.StatusDead)
	rc.Reset()
	res, err := admin.Requeue(ctx, ids[0], ev.Version)
	is.NoErr(err)
	is.Equal(res.Version, ev.Version+1)
	is.Equal(row(t, pool, ids[0]).status, "PENDING")
	updates := rc.Matching("UPDATE public.pginbox_outbox_")
	is.Equal(len(updates), 1)
	is.True(strings.Contains(updates[0], node))

	// With the event's scope: routed.
	scoped := admin.ForScope(inbox.Tenant(a))
	rc.Reset()
	ev, err = scoped.Get(ctx, ids[1])
	is.NoErr(err)
	is.Equal(ev.Status, outbox.StatusDead)
	reads := rc.Matching("pginbox_outbox_", "SELECT")
	is.Equal(len(reads), 1) // one shard read, not one per shard
	is.True(strings.Contains(reads[0], node))
	_, err = scoped.Requeue(ctx, ids[1], ev.Version+1)
	is.True(errors.Is(err, outbox.ErrVersionConflict))
	rc.Reset()
	_, err = scoped.Requeue(ctx, ids[1], ev.Version)
	is.NoErr(err)
	for _, l := range rc.Matching("pginbox_outbox_") {
		if !strings.Contains(l, node) {
			t.Errorf("the scoped requeue ran a statement on another node than the event's (%s): %s", node, l)
		}
	}
	is.Equal(row(t, pool, ids[1]).status, "PENDING")

	// Another scope's view sees neither.
	other := admin.ForScope(inbox.Tenant(b))
	_, err = other.Get(ctx, ids[0])
	is.True(errors.Is(err, outbox.ErrNotFound))
	_, err = other.Requeue(ctx, ids[0], 1)
	is.True(errors.Is(err, outbox.ErrNotFound))
}

// On Citus, lease recovery and the purge of published history run per
// scope: expired leases of two tenants on different nodes are recovered
// (each on its node), and Admin.Purge deletes both tenants' published events
// with a DELETE on each tenant's node.
func TestCitusRecoverAndPurge(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, rc := citusPool(t, inboxtest.CitusDatabase(t))
	a, b := twoTenants(t, pool)
	emitAs(t, pool, a, event("", 1))
	emitAs(t, pool, b, event("", 2))
	// Claimed by a relay that died: leases expired a minute ago.
	_, err := pool.Exec(ctx, `UPDATE pginbox_outbox SET status = 'PUBLISHING', attempts = 1,
		claim_token = '00000000-0000-0000-0000-000000000001', lease_expires_at = now() - interval '1 minute'`)
	is.NoErr(err)

	r := newRelay(t, pool, &recorder{}, outbox.RelayConfig{})
	rc.Reset()
	n, err := r.RecoverExpired(ctx)
	is.NoErr(err)
	is.Equal(n, 2)
	is.Equal(count(t, pool, "status = 'PENDING'"), 2)
	for _, tenant := range []string{a, b} {
		node := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, tenant))
		updates := rc.Matching("UPDATE public.pginbox_outbox_", "'"+tenant+"'")
		is.Equal(len(updates), 1)
		is.True(strings.Contains(updates[0], node))
	}

	is.Equal(drain(t, r), 2)
	// Published before the cutoff below, without waiting for the clock.
	_, err = pool.Exec(ctx, "UPDATE pginbox_outbox SET published_at = now() - interval '1 minute' WHERE status = 'PUBLISHED'")
	is.NoErr(err)
	admin, err := outbox.NewAdmin(pool, outbox.AdminConfig{Logger: quiet})
	is.NoErr(err)
	rc.Reset()
	res, err := admin.Purge(ctx, outbox.PurgeParams{OlderThan: time.Millisecond})
	is.NoErr(err)
	is.Equal(res.Deleted, int64(2))
	is.Equal(count(t, pool, "true"), 0)
	for _, tenant := range []string{a, b} {
		node := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, tenant))
		// The DELETE carries the scope as a parameter: the node tells.
		is.Equal(len(rc.Matching("DELETE FROM public.pginbox_outbox_", node)), 1)
	}
	is.Equal(len(rc.Matching("DELETE FROM public.pginbox_outbox_")), 2)
}

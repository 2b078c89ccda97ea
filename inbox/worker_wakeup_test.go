package inbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// listeners counts sessions of this database that issued the worker's LISTEN.
func listeners(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	// Compare without comments: this query's own text must not match (other
	// pooled sessions show it as their last query).
	err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database()
		  AND btrim(regexp_replace(query, '--[^\n]*', '', 'g'), E' \n') = 'LISTEN ' || $1`, inbox.NotifyChannel).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// timeToHandle accepts one message into an idle started worker and returns
// how long it took to be handled.
func timeToHandle(t *testing.T, cfg inbox.WorkerConfig, idle func(pool *pgxpool.Pool)) (time.Duration, *pgxpool.Pool) {
	t.Helper()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	handled := make(chan struct{}, 1)
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		select {
		case handled <- struct{}{}:
		default:
		}
		return writeEffect(ctx, m, "w")
	}), cfg)
	startWorker(t, w)
	idle(pool)

	start := time.Now()
	id := acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]
	select {
	case <-handled:
	case <-time.After(2 * time.Second):
		t.Fatalf("not handled within 2s (poll interval %v)", cfg.PollInterval)
	}
	took := time.Since(start)
	waitStatus(t, pool, id, "COMPLETED", 5*time.Second)
	return took, pool
}

func TestNotifyWakesIdleWorker(t *testing.T) {
	took, _ := timeToHandle(t, inbox.WorkerConfig{PollInterval: 10 * time.Second}, func(pool *pgxpool.Pool) {
		eventually(t, 10*time.Second, "the worker to LISTEN", func() bool { return listeners(t, pool) == 1 })
		// Let the catch-up claim after LISTEN pass: from here only a
		// notification (or the poll, 10s away) wakes the worker.
		time.Sleep(300 * time.Millisecond)
	})
	t.Logf("handled %v after Accept", took.Round(time.Millisecond))
}

func TestPollOnlyWorkerProcesses(t *testing.T) {
	took, pool := timeToHandle(t, inbox.WorkerConfig{PollOnly: true, PollInterval: 200 * time.Millisecond}, func(*pgxpool.Pool) {
		time.Sleep(300 * time.Millisecond) // past the first, empty claim
	})
	t.Logf("handled %v after Accept", took.Round(time.Millisecond))
	if n := listeners(t, pool); n != 0 {
		t.Fatalf("%d LISTEN sessions in poll-only mode", n)
	}
}

func TestWorkerClaimsOnlyOwnedConsumers(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})

	const billing = "billing.v1"
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error { return writeEffect(ctx, m, "orders") })
	var billingCalls atomic.Int32
	is.NoErr(reg.Register(handler.Key{Consumer: billing, EventType: "order.created", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			billingCalls.Add(1)
			return writeEffect(ctx, m, "billing")
		}))

	var orders, bills []inbox.ID
	for i := range 5 {
		orders = append(orders, acceptAll(t, c, orderMsg(fmt.Sprintf("o-%d", i), raw(`{"orderId":"o"}`)))...)
		m := orderMsg(fmt.Sprintf("b-%d", i), raw(`{"orderId":"o"}`))
		m.Consumer = billing
		bills = append(bills, acceptAll(t, c, m)...)
	}
	// A billing receipt with an expired lease: not this worker's to recover.
	_, err := pool.Exec(ctx, `UPDATE pginbox_receipts SET status = 'PROCESSING', claim_token = gen_random_uuid(),
		attempts = 1, lease_expires_at = now() - interval '1 second' WHERE id = $1`, bills[0])
	is.NoErr(err)

	w := newWorker(t, pool, reg, inbox.WorkerConfig{Consumers: []string{"orders.projection.v1"}, Lease: 600 * time.Millisecond, PollInterval: 100 * time.Millisecond})
	is.Equal(w.Consumers(), []string{"orders.projection.v1"})
	startWorker(t, w)
	for _, id := range orders {
		waitStatus(t, pool, id, "COMPLETED", 10*time.Second)
	}
	// Several polls and recovery rounds later, billing is untouched.
	time.Sleep(time.Second)
	is.Equal(billingCalls.Load(), int32(0))
	is.Equal(effectCount(t, pool, "worker = 'billing'"), 0)
	is.Equal(stateOf(t, pool, bills[0]).Status, "PROCESSING")
	for _, id := range bills[1:] {
		st := stateOf(t, pool, id)
		is.Equal(st.Status, "PENDING")
		is.Equal(st.Attempts, 0)
	}

	n, err := w.RecoverExpired(ctx)
	is.NoErr(err)
	is.Equal(n, 0)
}

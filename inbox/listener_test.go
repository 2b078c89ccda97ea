package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
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
func timeToHandle(t *testing.T, cfg inbox.WorkerConfig, idle func(pool *pgxpool.Pool, trace *claimTrace)) (time.Duration, *pgxpool.Pool) {
	t.Helper()
	trace := &claimTrace{}
	pool, _ := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = trace })
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
	idle(pool, trace)

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
	t.Parallel()
	took, _ := timeToHandle(t, inbox.WorkerConfig{PollInterval: 10 * time.Second}, func(pool *pgxpool.Pool, trace *claimTrace) {
		testkit.Eventually(t, 10*time.Second, func() bool { return listeners(t, pool) == 1 }, "the worker to LISTEN")
		// Let the catch-up claim after LISTEN pass: from here only a
		// notification (or the poll, 10s away) wakes the worker.
		testkit.Eventually(t, 10*time.Second, func() bool { _, after := trace.counts(); return after > 0 }, "the catch-up claim after LISTEN")
	})
	t.Logf("handled %v after Accept", took.Round(time.Millisecond))
}

func TestPollOnlyWorkerProcesses(t *testing.T) {
	t.Parallel()
	took, pool := timeToHandle(t, inbox.WorkerConfig{PollOnly: true, PollInterval: 200 * time.Millisecond}, func(_ *pgxpool.Pool, trace *claimTrace) {
		testkit.Eventually(t, 10*time.Second, func() bool { claims, _ := trace.counts(); return claims > 0 }, "the first, empty claim")
	})
	t.Logf("handled %v after Accept", took.Round(time.Millisecond))
	if n := listeners(t, pool); n != 0 {
		t.Fatalf("%d LISTEN sessions in poll-only mode", n)
	}
}

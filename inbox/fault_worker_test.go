package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// TestFaultWorkerDrainsBacklogThroughCuts runs a worker whose every
// connection (claims, handler transactions, heartbeats, LISTEN) goes through
// the proxy, and cuts them all repeatedly while it drains a backlog. Commits
// whose reply is lost, failed claims and failed completions must all end in
// exactly one business row per receipt, every receipt COMPLETED.
func TestFaultWorkerDrainsBacklogThroughCuts(t *testing.T) {
	t.Parallel()
	const (
		messages = 200
		cuts     = 10
	)
	ctx := context.Background()
	p, dsn, direct := faultDB(t)
	setupEffects(t, direct)
	// A generous budget: a receipt may lose an attempt to every cut.
	backlog := newClient(t, direct, inbox.Config{MaxAttempts: 100})
	for i := range messages {
		if _, err := backlog.Accept(ctx, faultMsg(i)); err != nil {
			t.Fatal(err)
		}
	}

	pool := proxyPool(t, p, dsn, func(c *pgxpool.Config) { c.MaxConns = 8 })
	fn := func(ctx context.Context, m *handler.Msg) error {
		if err := writeEffect(ctx, m, "w"); err != nil {
			return err
		}
		select { // some work after the write, so cuts land inside transactions too
		case <-time.After(20 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	start := time.Now()
	startWorker(t, newWorker(t, pool, registry(t, fn), inbox.WorkerConfig{
		Concurrency:  4,
		Lease:        time.Second,
		PollInterval: 50 * time.Millisecond,
		Backoff:      func(int) time.Duration { return 50 * time.Millisecond },
		Logger:       quietLogger(t),
	}))

	cutsWhileDraining := 0
	for range cuts {
		time.Sleep(120 * time.Millisecond) // pacing the faults: cuts spread over the drain
		if countRows(t, direct, "status = 'COMPLETED'") < messages {
			cutsWhileDraining++
		}
		p.Cut()
	}
	t.Logf("%d cuts (%d while the backlog was draining) closed %d connections", cuts, cutsWhileDraining, p.CutCount())
	if cutsWhileDraining < cuts/2 {
		t.Fatalf("only %d cuts landed while the backlog drained; the test proved little", cutsWhileDraining)
	}

	testkit.Eventually(t, 60*time.Second, func() bool {
		return countRows(t, direct, "status = 'COMPLETED'") == messages
	}, "every receipt to complete")
	t.Logf("backlog of %d drained through the cuts in %v; attempts: %s", messages,
		time.Since(start).Round(time.Millisecond), attemptSummary(t, direct))
	requireOneEffectPerReceipt(t, direct, messages)
	if n := countRows(t, direct, "last_error IS NOT NULL"); n != 0 {
		t.Errorf("%d completed receipts kept an error", n)
	}
}

// attemptSummary is "attempts=receipts, ..." over all receipts.
func attemptSummary(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT attempts, count(*) FROM pginbox_receipts_live GROUP BY attempts ORDER BY attempts")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	s := ""
	for rows.Next() {
		var a, n int
		if err := rows.Scan(&a, &n); err != nil {
			t.Fatal(err)
		}
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%d:%d", a, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFaultBlackholeDuringHandlerFencesStaleWorker partitions worker A (on the
// proxy) from the database while its handler runs. Its heartbeats cannot
// extend the lease, so worker B (direct connection) recovers the receipt and
// completes it. When the partition heals, A's completion, held until then,
// reaches the server and is refused by the claim token: A's business write
// rolls back and exactly one business row remains.
func TestFaultBlackholeDuringHandlerFencesStaleWorker(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	ctx := context.Background()
	p, dsn, direct := faultDB(t)
	setupEffects(t, direct)
	id := acceptAll(t, newClient(t, direct, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

	entered, proceed := make(chan struct{}), make(chan struct{})
	var proceedOnce sync.Once
	release := func() { proceedOnce.Do(func() { close(proceed) }) }
	defer release() // a failing test must not leave A's handler blocked
	regA := registry(t, func(ctx context.Context, m *handler.Msg) error {
		if err := writeEffect(ctx, m, "A"); err != nil {
			return err
		}
		close(entered)
		<-proceed // ignores ctx: only the fence can stop A now
		return nil
	})
	logA, recA := newLogRecorder(t)
	poolA := proxyPool(t, p, dsn, func(c *pgxpool.Config) { c.MaxConns = 4 })
	wA := newWorker(t, poolA, regA, inbox.WorkerConfig{
		Concurrency: 1, Lease: lease, HeartbeatInterval: 150 * time.Millisecond, HandlerTimeout: 2 * time.Second, Logger: logA,
	})
	defer p.Resume()
	doneA := make(chan error, 1)
	go func() {
		n, err := wA.Drain(ctx)
		if err == nil && n != 1 {
			err = fmt.Errorf("A's Drain handled %d receipts, want 1", n)
		}
		doneA <- err
	}()
	select {
	case <-entered:
	case err := <-doneA:
		t.Fatalf("A's Drain returned before its handler ran: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("A's handler never ran")
	}

	// The partition: A's session sits idle in its transaction, holding the
	// receipt, until the server's idle timeout (HandlerTimeout + 1s) ends it.
	p.Blackhole()
	partitioned := time.Now()

	wB := newWorker(t, direct, registry(t, func(ctx context.Context, m *handler.Msg) error {
		return writeEffect(ctx, m, "B")
	}), inbox.WorkerConfig{Lease: lease})
	testkit.Eventually(t, 15*time.Second, func() bool {
		n, err := wB.RecoverExpired(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}, "B to recover A's expired lease")
	t.Logf("B recovered the receipt %v after the partition began", time.Since(partitioned).Round(time.Millisecond))
	if n, err := wB.Drain(ctx); err != nil || n != 1 {
		t.Fatalf("B's Drain: %d, %v", n, err)
	}
	st := stateOf(t, direct, id)
	if st.Status != "COMPLETED" || st.Attempts != 2 {
		t.Fatalf("after B: %s, attempt %d; want COMPLETED, 2", st.Status, st.Attempts)
	}

	// A's handler returns; its commit goes into the partition and waits.
	release()
	select {
	case err := <-doneA:
		t.Fatalf("A finished inside the partition: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	p.Resume()
	select {
	case err := <-doneA:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("A's Drain did not return after the partition healed")
	}
	if !recA.logged("lease lost before") {
		t.Error("A recorded its attempt over B's outcome instead of being fenced by the claim token")
	}
	waitSettled(t, p, direct, proxiedApp, false)
	if n := effectCount(t, direct, "worker = 'A'"); n != 0 {
		t.Errorf("%d business rows of the stale worker A", n)
	}
	if n := effectCount(t, direct, "true"); n != 1 {
		t.Errorf("%d business rows, want 1", n)
	}
	st = stateOf(t, direct, id)
	if st.Status != "COMPLETED" || st.Attempts != 2 || st.LastError != nil {
		t.Errorf("after A: %s, attempt %d, last_error %s; want B's outcome untouched", st.Status, st.Attempts, deref(st.LastError))
	}
}

package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// With MessagesPerTx, several messages commit in one transaction, yet each one
// still reaches its own outcome: a failing handler rolls back only its message.
func TestBatchedTransactionsKeepPerMessageOutcomes(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})

	const n = 60
	for i := range n {
		_, err := c.Accept(ctx, orderMsg(fmt.Sprintf("evt-%02d", i), map[string]int{"n": i}))
		is.NoErr(err)
	}
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		if err := writeEffect(ctx, m, "w"); err != nil {
			return err
		}
		if strings.HasSuffix(m.MessageID, "5") { // 6 of 60 fail after writing
			return errors.New("rejected by downstream")
		}
		return nil
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 2, MessagesPerTx: 10, ClaimBatch: 20, PollInterval: 50 * time.Millisecond})
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 20*time.Second, func() bool { return countRows(t, pool, "status IN ('PENDING', 'PROCESSING')") == 0 }, "no receipt left PENDING or PROCESSING")
	is.NoErr(w.Stop(ctx))

	is.Equal(countRows(t, pool, "status = 'COMPLETED'"), n-6)
	is.Equal(countRows(t, pool, "status = 'RETRYABLE' AND last_error = 'rejected by downstream'"), 6)
	is.Equal(effectCount(t, pool, "message_id LIKE '%5'"), 0) // rolled back to their savepoints
	is.Equal(effectCount(t, pool, "true"), n-6)

	// Completions share transactions: completed_at is now(), the start time of
	// the transaction, so one batch shares one value.
	var txs int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(DISTINCT completed_at) FROM pginbox_receipts_live WHERE status = 'COMPLETED'").Scan(&txs))
	if txs >= n-6 || txs < (n-6)/10 {
		t.Fatalf("%d completed receipts in %d transactions: want batches of up to 10", n-6, txs)
	}
	t.Logf("%d completed receipts committed in %d transactions", n-6, txs)
}

// A lease lost before a batch starts skips that message alone.
func TestBatchedTransactionLeaseLossIsPerMessage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})
	for i := range 3 {
		_, err := c.Accept(ctx, orderMsg(fmt.Sprintf("evt-%d", i), map[string]int{"n": i}))
		is.NoErr(err)
	}
	var stolen atomic.Bool
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		return writeEffect(ctx, m, "w")
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 1, MessagesPerTx: 3, ClaimBatch: 3})
	inbox.SetTestHooks(w, func(int) {
		// Another worker takes one receipt over before the batch starts.
		if stolen.CompareAndSwap(false, true) {
			_, err := pool.Exec(ctx, "UPDATE pginbox_work SET claim_token = gen_random_uuid() WHERE receipt_id = (SELECT id FROM pginbox_receipts WHERE message_id = 'evt-1')")
			is.NoErr(err)
		}
	}, nil)
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 10*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == 2 }, "2 receipts COMPLETED")
	is.NoErr(w.Stop(ctx))

	is.True(stolen.Load())
	is.Equal(effectCount(t, pool, "message_id = 'evt-1'"), 0) // the stolen one never ran here
	is.Equal(effectCount(t, pool, "message_id <> 'evt-1'"), 2)
	var status string
	is.NoErr(pool.QueryRow(ctx, "SELECT status FROM pginbox_receipts_live WHERE message_id = 'evt-1'").Scan(&status))
	is.Equal(status, "PROCESSING") // owned by the (simulated) other worker, untouched here
}

// In a batched transaction, a message whose deadline ends mid-statement breaks
// the shared connection; the other messages are handed back without spending
// an attempt, and only the slow one is charged.
func TestBatchSurvivesOneMessageTimingOutMidStatement(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})
	for _, id := range []string{"evt-1", "evt-2", "evt-3"} {
		_, err := c.Accept(ctx, orderMsg(id, map[string]string{"orderId": id}))
		is.NoErr(err)
	}
	var slept atomic.Bool
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		if m.MessageID == "evt-2" && slept.CompareAndSwap(false, true) {
			if _, err := m.Tx.Exec(ctx, "SELECT pg_sleep(5)"); err != nil {
				return err
			}
		}
		return writeEffect(ctx, m, "w")
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{
		Concurrency: 1, MessagesPerTx: 3, ClaimBatch: 3, HandlerTimeout: 300 * time.Millisecond,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }, PollInterval: 50 * time.Millisecond,
	})
	is.NoErr(w.Start(ctx))
	defer w.Stop(ctx)
	testkit.Eventually(t, 15*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == 3 }, "3 receipts COMPLETED")

	is.True(slept.Load())
	is.Equal(effectCount(t, pool, "true"), 3)
	attempts := func(id string) int {
		var n int
		is.NoErr(pool.QueryRow(ctx, "SELECT attempts FROM pginbox_receipts_live WHERE message_id = $1", id).Scan(&n))
		return n
	}
	is.Equal(attempts("evt-2"), 2) // charged for its timeout
	is.Equal(attempts("evt-1"), 1) // released, not charged
	is.Equal(attempts("evt-3"), 1)
}

// A transaction carries one scope, so a slot takes up to MessagesPerTx
// receipts of one scope: receipts of interleaved tenants still commit ten to
// a transaction, not one transaction per tenant per batch.
func TestBatchedTransactionsGroupInterleavedTenants(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	const tenants, perTenant = 4, 10
	for i := range tenants * perTenant {
		m := orderMsg(fmt.Sprintf("evt-%02d", i), map[string]int{"n": i})
		m.Scope = inbox.Tenant(fmt.Sprintf("tenant-%d", i%tenants)) // accepted interleaved
		_, err := c.Accept(ctx, m)
		is.NoErr(err)
	}
	reg := registry(t, func(context.Context, *handler.Msg) error { return nil })
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 1, MessagesPerTx: perTenant, ClaimBatch: tenants * perTenant})
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 20*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == tenants*perTenant }, "every receipt COMPLETED")
	is.NoErr(w.Stop(ctx))

	// completed_at is the transaction's start time: one value per transaction.
	var txs, mixed int
	is.NoErr(pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE scopes > 1) FROM (
		SELECT count(DISTINCT scope_id) AS scopes FROM pginbox_receipts_live GROUP BY completed_at) t`).Scan(&txs, &mixed))
	is.Equal(mixed, 0) // never two scopes in one transaction
	if txs != tenants {
		t.Fatalf("%d receipts of %d interleaved tenants committed in %d transactions, want %d (one per tenant)", tenants*perTenant, tenants, txs, tenants)
	}
}

package inbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// A worker that claims a receipt again after its first claim was recovered must
// keep heartbeating the new claim when the stale attempt finishes.
func TestReclaimedReceiptKeepsItsNewLease(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})
	res, err := c.Accept(ctx, orderMsg("evt-1", map[string]string{"orderId": "o-1"}))
	is.NoErr(err)

	secondRunning, finishFirst, finishSecond := make(chan struct{}), make(chan struct{}), make(chan struct{})
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		switch m.Attempt {
		case 1:
			// Recovery takes the receipt away while this attempt runs...
			if _, err := pool.Exec(ctx, `UPDATE pginbox_receipts SET status = 'RETRYABLE', claim_token = NULL,
				lease_expires_at = NULL, available_at = now() WHERE id = $1`, m.ReceiptID); err != nil {
				return err
			}
			<-finishFirst // ...and this worker claims it again before this attempt ends.
			return nil
		default:
			close(secondRunning)
			<-finishSecond
			return writeEffect(ctx, m, "w")
		}
	})
	const lease = 1500 * time.Millisecond
	w := newWorker(t, pool, reg, inbox.WorkerConfig{
		Concurrency: 2, Lease: lease, HeartbeatInterval: 250 * time.Millisecond,
		PollOnly: true, PollInterval: 50 * time.Millisecond,
	})
	is.NoErr(w.Start(ctx))
	defer w.Stop(ctx)

	select {
	case <-secondRunning:
	case <-time.After(10 * time.Second):
		t.Fatal("the receipt was not claimed a second time")
	}
	close(finishFirst) // the stale attempt ends; its completion is refused
	time.Sleep(2 * lease)
	var alive bool
	is.NoErr(pool.QueryRow(ctx, "SELECT lease_expires_at > now() FROM pginbox_receipts WHERE id = $1", res.ID).Scan(&alive))
	is.True(alive) // the second attempt's lease is still being extended
	close(finishSecond)
	eventually(t, 10*time.Second, "the receipt COMPLETED", func() bool { return countRows(t, pool, "status = 'COMPLETED'") == 1 })
	is.Equal(effectCount(t, pool, "true"), 1)
}

// In a batched transaction, a message whose deadline ends mid-statement breaks
// the shared connection; the other messages are handed back without spending
// an attempt, and only the slow one is charged.
func TestBatchSurvivesOneMessageTimingOutMidStatement(t *testing.T) {
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
	eventually(t, 15*time.Second, "3 receipts COMPLETED", func() bool { return countRows(t, pool, "status = 'COMPLETED'") == 3 })

	is.True(slept.Load())
	is.Equal(effectCount(t, pool, "true"), 3)
	attempts := func(id string) int {
		var n int
		is.NoErr(pool.QueryRow(ctx, "SELECT attempts FROM pginbox_receipts WHERE message_id = $1", id).Scan(&n))
		return n
	}
	is.Equal(attempts("evt-2"), 2) // charged for its timeout
	is.Equal(attempts("evt-1"), 1) // released, not charged
	is.Equal(attempts("evt-3"), 1)
}

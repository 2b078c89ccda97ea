package inbox_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// A receipt whose lease expired and that the same worker claimed again
// can sit twice in one handler slot's batch: the old lease (its token
// stale) and the new one. Only the new claim may run its handler: one
// handler call, one business row, the receipt COMPLETED once (seen from
// the runtime history check: a receipt COMPLETED with two business rows).
func TestStaleLeaseBesideItsSuccessorInOneBatchRunsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := newPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (receipt_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		calls.Add(1)
		_, err := m.Tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, m.ReceiptID.String())
		return err
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{MessagesPerTx: 10})
	c := newClient(t, pool, inbox.Config{})
	res, err := c.Accept(ctx, orderMsg("m-1", map[string]int{"n": 1}))
	if err != nil {
		t.Fatal(err)
	}
	first, err := inbox.ClaimNow(ctx, w, 1)
	if err != nil || len(first) != 1 {
		t.Fatalf("first claim: %d leases, %v", len(first), err)
	}
	// The lease runs out before its handler started; recovery makes the
	// receipt due again and the same worker claims it again.
	if _, err := pool.Exec(ctx, `UPDATE pginbox_work SET lease_expires_at = now() - interval '1 second' WHERE receipt_id = $1`, res.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := w.RecoverExpired(ctx); err != nil || n != 1 {
		t.Fatalf("recovered %d, %v; want 1", n, err)
	}
	second, err := inbox.ClaimNow(ctx, w, 1)
	if err != nil || len(second) != 1 {
		t.Fatalf("second claim: %d leases, %v", len(second), err)
	}
	inbox.RunTogether(w, append(first, second...))

	var effects int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effects`).Scan(&effects); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || effects != 1 {
		t.Fatalf("the handler ran %d times and committed %d business rows for one receipt, want 1 and 1", calls.Load(), effects)
	}
	if n := countRows(t, pool, "id = $1 AND status = 'COMPLETED' AND attempts = 2", res.ID); n != 1 {
		t.Fatalf("the receipt is not COMPLETED on its second attempt")
	}
}

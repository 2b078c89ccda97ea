package inbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

func TestStaleWorkerCommitIsRefused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	poolA, dsn := newPool(t)
	poolB := poolFor(t, dsn)
	setupEffects(t, poolA)
	id := acceptAll(t, newClient(t, poolA, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

	entered, proceed := make(chan struct{}), make(chan struct{})
	regA := registry(t, func(ctx context.Context, m *handler.Msg) error {
		close(entered)
		<-proceed
		return writeEffect(ctx, m, "A") // succeeds: only the fence can stop A
	})
	logA, recA := newLogRecorder(t)
	// A never heartbeats: a worker stalled by a long pause or a partition.
	wA := newWorker(t, poolA, regA, inbox.WorkerConfig{Lease: time.Second, Logger: logA})
	inbox.StallHeartbeat(wA)
	doneA := make(chan error, 1)
	go func() {
		_, err := wA.Drain(ctx)
		doneA <- err
	}()
	select {
	case <-entered:
	case err := <-doneA:
		t.Fatalf("A's Drain returned before its handler ran: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("A's handler never ran")
	}

	wB := newWorker(t, poolB, registry(t, func(ctx context.Context, m *handler.Msg) error {
		return writeEffect(ctx, m, "B")
	}), inbox.WorkerConfig{Lease: time.Second})
	eventually(t, 10*time.Second, "B to recover A's expired lease", func() bool {
		n, err := wB.RecoverExpired(ctx)
		is.NoErr(err)
		return n == 1
	})
	n, err := wB.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	st := stateOf(t, poolB, id)
	is.Equal(st.Status, "COMPLETED")
	is.Equal(st.Attempts, 2)

	close(proceed)
	select {
	case err := <-doneA:
		is.NoErr(err)
	case <-time.After(10 * time.Second):
		t.Fatal("A's Drain did not return")
	}
	is.True(recA.logged("lease lost before commit"))   // the completion update matched no row
	is.Equal(effectCount(t, poolA, "worker = 'A'"), 0) // rolled back with it
	is.Equal(effectCount(t, poolA, "true"), 1)
	st = stateOf(t, poolA, id)
	is.Equal(st.Status, "COMPLETED") // A recorded nothing over B's outcome
	is.Equal(st.Attempts, 2)
	is.True(st.LastError == nil)
}

func TestHeartbeatKeepsLongHandlerOwned(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, dsn := newPool(t)
	setupEffects(t, pool)
	id := acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

	const lease = 600 * time.Millisecond
	var calls atomic.Int32
	var cancelled atomic.Bool
	fn := func(ctx context.Context, m *handler.Msg) error {
		calls.Add(1)
		select {
		case <-time.After(3 * lease):
		case <-ctx.Done():
			cancelled.Store(true)
			return context.Cause(ctx)
		}
		return writeEffect(ctx, m, "any")
	}
	// Two running workers: either one's recovery would take an unrenewed lease.
	var recs []*logRecorder
	for _, p := range []*pgxpool.Pool{pool, poolFor(t, dsn)} {
		logger, rec := newLogRecorder(t)
		recs = append(recs, rec)
		startWorker(t, newWorker(t, p, registry(t, fn), inbox.WorkerConfig{Lease: lease, Logger: logger}))
	}

	st := waitStatus(t, pool, id, "COMPLETED", 10*time.Second)
	is.Equal(st.Attempts, 1)
	is.Equal(calls.Load(), int32(1))
	is.True(!cancelled.Load())
	is.Equal(effectCount(t, pool, "true"), 1)
	for _, rec := range recs {
		is.True(!rec.logged("recovered an expired lease"))
	}
}

func TestLeaseStolenMidRunCancelsHandler(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	id := acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

	wrote := make(chan struct{})
	var cause error
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		if err := writeEffect(ctx, m, "A"); err != nil {
			return err
		}
		close(wrote)
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("handler context was not cancelled")
		}
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Lease: 600 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		_, err := w.Drain(ctx)
		done <- err
	}()
	select {
	case <-wrote:
	case err := <-done:
		t.Fatalf("Drain returned before the handler wrote: %v", err)
	}

	var stolen inbox.ID
	is.NoErr(pool.QueryRow(ctx, "UPDATE pginbox_receipts SET claim_token = gen_random_uuid() WHERE id = $1 RETURNING claim_token", id).Scan(&stolen))
	start := time.Now()
	is.NoErr(<-done)
	if !errors.Is(cause, inbox.ErrLeaseLost) {
		t.Fatalf("handler context cause = %v, want ErrLeaseLost", cause)
	}
	t.Logf("handler cancelled %v after the lease was stolen", time.Since(start).Round(time.Millisecond))
	is.Equal(effectCount(t, pool, "true"), 0) // rolled back

	// The worker recorded nothing: the receipt belongs to the thief.
	var status string
	var token inbox.ID
	var lastError *string
	is.NoErr(pool.QueryRow(ctx, "SELECT status, claim_token, last_error FROM pginbox_receipts WHERE id = $1", id).Scan(&status, &token, &lastError))
	is.Equal(status, "PROCESSING")
	is.Equal(token, stolen)
	is.True(lastError == nil)
}

// A worker that claims a receipt again after its first claim was recovered must
// keep heartbeating the new claim when the stale attempt finishes.
func TestReclaimedReceiptKeepsItsNewLease(t *testing.T) {
	t.Parallel()
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

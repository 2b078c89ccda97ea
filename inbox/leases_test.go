package inbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

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

// A worker that stalls between its claim and its handler (a long pause, a
// partition) loses the receipt to recovery once the lease expires; when it
// resumes, the fenced start finds the receipt gone and its handler never runs.
func TestStaleClaimCannotRunAfterRecovery(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	poolA, dsn := newPool(t)
	poolB := poolFor(t, dsn)
	setupEffects(t, poolA)
	id := acceptAll(t, newClient(t, poolA, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

	claimed, proceed := make(chan struct{}), make(chan struct{})
	var resume sync.Once
	defer resume.Do(func() { close(proceed) }) // a failing test must not leave A blocked
	var ranA atomic.Bool
	logA, recA := newLogRecorder(t)
	wA := newWorker(t, poolA, registry(t, func(ctx context.Context, m *handler.Msg) error {
		ranA.Store(true)
		return writeEffect(ctx, m, "A")
	}), inbox.WorkerConfig{Lease: time.Second, Logger: logA})
	inbox.StallHeartbeat(wA)
	inbox.SetTestHooks(wA, func(int) {
		close(claimed)
		<-proceed
	}, nil)
	doneA := make(chan error, 1)
	go func() {
		_, err := wA.Drain(ctx)
		doneA <- err
	}()
	select {
	case <-claimed:
	case <-time.After(10 * time.Second):
		t.Fatal("A never claimed")
	}

	wB := newWorker(t, poolB, registry(t, func(ctx context.Context, m *handler.Msg) error {
		return writeEffect(ctx, m, "B")
	}), inbox.WorkerConfig{Lease: time.Second})
	testkit.Eventually(t, 10*time.Second, func() bool {
		n, err := wB.RecoverExpired(ctx)
		is.NoErr(err)
		return n == 1
	}, "B to recover A's expired lease")
	n, err := wB.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)

	resume.Do(func() { close(proceed) })
	select {
	case err := <-doneA:
		is.NoErr(err)
	case <-time.After(10 * time.Second):
		t.Fatal("A's Drain did not return")
	}
	is.True(!ranA.Load()) // the fenced start refused A before its handler
	is.True(recA.logged("lease lost before the handler started"))
	is.Equal(effectCount(t, poolA, "true"), 1)
	st := stateOf(t, poolA, id)
	is.Equal(st.Status, "COMPLETED")
	is.Equal(st.Attempts, 2)
	is.True(st.LastError == nil) // A recorded nothing over B's outcome
}

// A running handler holds its receipt in its own transaction: even with its
// heartbeat stalled past the lease, recovery cannot take the receipt, and the
// handler's outcome is the only one.
func TestRunningHandlerKeepsItsReceiptPastItsLease(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	poolA, dsn := newPool(t)
	poolB := poolFor(t, dsn)
	setupEffects(t, poolA)
	id := acceptAll(t, newClient(t, poolA, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

	entered, proceed := make(chan struct{}), make(chan struct{})
	wA := newWorker(t, poolA, registry(t, func(ctx context.Context, m *handler.Msg) error {
		close(entered)
		<-proceed
		return writeEffect(ctx, m, "A")
	}), inbox.WorkerConfig{Lease: 500 * time.Millisecond})
	inbox.StallHeartbeat(wA)
	doneA := make(chan error, 1)
	go func() {
		_, err := wA.Drain(ctx)
		doneA <- err
	}()
	testkit.WaitFor(t, entered, 10*time.Second, "A's handler to run")
	waitLeaseExpired(t, poolA, id)
	wB := newWorker(t, poolB, registry(t, func(ctx context.Context, m *handler.Msg) error {
		return writeEffect(ctx, m, "B")
	}), inbox.WorkerConfig{Lease: 500 * time.Millisecond})
	n, err := wB.RecoverExpired(ctx)
	is.NoErr(err)
	is.Equal(n, 0) // locked by A's transaction
	n, err = wB.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 0)

	close(proceed)
	is.NoErr(<-doneA)
	st := stateOf(t, poolA, id)
	is.Equal(st.Status, "COMPLETED")
	is.Equal(st.Attempts, 1)
	is.Equal(effectCount(t, poolA, "worker = 'A'"), 1)
	is.Equal(effectCount(t, poolA, "true"), 1)
}

// A lease lost while the receipt waits for a handler (recovered, re-claimed
// elsewhere) is never run here, and this worker records nothing over the new
// owner's claim.
func TestLeaseLostWhileQueuedSkipsTheHandler(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	id := acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

	var ran atomic.Bool
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		ran.Store(true)
		return writeEffect(ctx, m, "w")
	}), inbox.WorkerConfig{})
	var stolen inbox.ID
	inbox.SetTestHooks(w, func(int) {
		// Another worker takes the receipt over between claim and handler.
		is.NoErr(pool.QueryRow(ctx, "UPDATE pginbox_work SET claim_token = gen_random_uuid() WHERE receipt_id = $1 RETURNING claim_token", id).Scan(&stolen))
	}, nil)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	is.True(!ran.Load())
	is.Equal(effectCount(t, pool, "true"), 0)
	var status string
	var token inbox.ID
	var lastError *string
	is.NoErr(pool.QueryRow(ctx, "SELECT status, claim_token, last_error FROM pginbox_receipts_live WHERE id = $1", id).Scan(&status, &token, &lastError))
	is.Equal(status, "PROCESSING")
	is.Equal(token, stolen)
	is.True(lastError == nil)
}

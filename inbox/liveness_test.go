package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
)

// A handler that ignores its context and never returns is abandoned shortly
// after its deadline: its attempt is recorded ("handler hung"), its slot takes
// no more work until it returns, and the receipts it would have taken stay
// free for healthy workers.
func TestHungHandlerIsAbandoned(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, dsn := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	hung := acceptAll(t, c, orderMsg("hang", map[string]string{"orderId": "o-0"}))[0]

	unblock := make(chan struct{})
	var unblockOnce sync.Once
	defer unblockOnce.Do(func() { close(unblock) })
	returned := make(chan struct{})
	logger, rec := newLogRecorder(t)
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		if m.MessageID == "hang" && m.Attempt == 1 {
			<-unblock // ignores ctx
			close(returned)
		}
		return nil
	}), inbox.WorkerConfig{Concurrency: 1, HandlerTimeout: time.Second, PollInterval: 50 * time.Millisecond, Logger: logger})
	startWorker(t, w)

	testkit.Eventually(t, 20*time.Second, func() bool {
		return countRows(t, pool, "id = $1 AND status = 'RETRYABLE' AND last_error LIKE 'handler hung%'", hung) == 1
	}, "the hung handler's attempt to be recorded")
	is.True(rec.logged("abandoning a handler that does not return"))

	// The only slot is lost: new work waits for others instead of being held.
	others := acceptAll(t, c, orderMsg("next-1", map[string]int{"n": 1}), orderMsg("next-2", map[string]int{"n": 2}))
	// A worker with no slot runs no claim, so no event marks a round that
	// took nothing: watch ten poll intervals.
	testkit.Never(t, 10*50*time.Millisecond, func() bool {
		return countRows(t, pool, "id = ANY($1) AND status = 'PENDING' AND attempts = 0", others) != 2
	}, "the worker whose only slot hung claimed new work")
	healthy := newWorker(t, poolFor(t, dsn), registry(t, func(context.Context, *handler.Msg) error { return nil }), inbox.WorkerConfig{})
	n, err := healthy.Drain(ctx)
	is.NoErr(err)
	is.True(n >= 2)

	// When the handler finally returns, its slot works again.
	unblockOnce.Do(func() { close(unblock) })
	<-returned
	testkit.Eventually(t, 10*time.Second, func() bool { return rec.logged("its slot is back in use") }, "the returned slot to log it")
	late := acceptAll(t, c, orderMsg("late", map[string]int{"n": 3}))[0]
	testkit.Eventually(t, 10*time.Second, func() bool {
		return countRows(t, pool, "id = $1 AND status = 'COMPLETED'", late) == 1
	}, "the worker to handle new work again")
}

// In a batch, a hung handler's receipt is charged and the batch's other
// receipts are released unspent, including ones whose handlers never started.
func TestHungHandlerInABatchReleasesTheOthers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ids := acceptAll(t, c, orderMsg("a", map[string]int{"n": 1}), orderMsg("hang", map[string]int{"n": 2}), orderMsg("c", map[string]int{"n": 3}))
	unblock := make(chan struct{})
	defer close(unblock)
	var hangs atomic.Int32
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		if m.MessageID == "hang" && hangs.Add(1) == 1 {
			<-unblock
		}
		return nil
	}), inbox.WorkerConfig{Concurrency: 1, MessagesPerTx: 3, ClaimBatch: 3, HandlerTimeout: time.Second, PollOnly: true, PollInterval: time.Hour})
	startWorker(t, w)
	testkit.Eventually(t, 20*time.Second, func() bool {
		return countRows(t, pool, "message_id = 'hang' AND last_error LIKE 'handler hung%'") == 1
	}, "the hung batch to be abandoned")
	// The others were released without spending an attempt, whether their
	// handler ran inside the abandoned transaction or never started. A slot
	// may start a batch before the claim queued all three, so one that ran
	// in an earlier transaction of its own may have completed instead. The
	// abandonment records the hung attempt between releases: wait for them.
	testkit.Eventually(t, 10*time.Second, func() bool {
		return countRows(t, pool, "id = ANY($1) AND message_id <> 'hang' AND ((status = 'PENDING' AND attempts = 0) OR (status = 'COMPLETED' AND attempts = 1))", ids) == 2
	}, "the others to be released unspent (or completed before the hang)")
	is.Equal(countRows(t, pool, "status = 'PROCESSING'"), 0)
}

// A Stop whose handlers ignore cancellation gives up on them: it returns with
// an error saying so, records their attempts, ends their transactions and
// stops heartbeating, instead of pinning their receipts.
func TestStopGivesUpOnHandlersThatDoNotReturn(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	id := acceptAll(t, c, orderMsg("stuck", map[string]int{"n": 1}))[0]
	entered, unblock := make(chan struct{}), make(chan struct{})
	defer close(unblock)
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		close(entered)
		<-unblock
		return nil
	}), inbox.WorkerConfig{Concurrency: 2, ShutdownGrace: 100 * time.Millisecond, Lease: 2 * time.Second})
	is.NoErr(w.Start(context.Background()))
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := w.Stop(ctx)
	if err == nil || !strings.Contains(err.Error(), "did not return after cancellation") {
		t.Fatalf("Stop = %v, want an error about the handler that did not return", err)
	}
	st := stateOf(t, pool, id)
	is.Equal(st.Status, "RETRYABLE")
	is.True(strings.Contains(deref(st.LastError), "did not return after the worker was stopped"))
	// Nothing extends a lease any more: the last one (2s) runs out.
	testkit.Eventually(t, 10*time.Second, func() bool { return countRows(t, pool, "lease_expires_at > now()") == 0 },
		"every lease to run out after Stop")
}

// Stop with a context that ends before ShutdownGrace cancels the running
// handlers at once, and still releases their receipts before it returns, so a
// caller that closes the pool right after leaves nothing to lease expiry.
func TestStopReleasesCancelledReceiptsBeforeReturning(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	id := acceptAll(t, c, orderMsg("slow", map[string]int{"n": 1}))[0]
	entered := make(chan struct{})
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	}), inbox.WorkerConfig{ShutdownGrace: time.Minute})
	is.NoErr(w.Start(context.Background()))
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := w.Stop(ctx)
	is.True(errors.Is(err, context.DeadlineExceeded))
	st := stateOf(t, pool, id)
	is.Equal(st.Status, "PENDING") // released, not left PROCESSING
	is.Equal(st.Attempts, 0)
}

// Stop honours its context while a claim is stuck on a dead connection.
func TestStopHonoursContextWhileAClaimIsStuck(t *testing.T) {
	t.Parallel()
	p, dsn, direct := faultDB(t)
	c := newClient(t, direct, inbox.Config{})
	acceptAll(t, c, orderMsg("a", map[string]int{"n": 1}))
	w := newWorker(t, proxyPool(t, p, dsn), registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{PollOnly: true, PollInterval: 20 * time.Millisecond})
	startWorker(t, w)
	testkit.Eventually(t, 10*time.Second, func() bool { return countRows(t, direct, "status = 'COMPLETED'") == 1 }, "the first receipt to complete")
	defer p.Resume()
	p.Blackhole()
	acceptAll(t, c, orderMsg("b", map[string]int{"n": 2}))
	testkit.Eventually(t, 10*time.Second, func() bool { return p.Held() > 0 }, "a poll's claim stuck in the partition")

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	w.Stop(ctx)
	// A claim waits up to 30s for its reply; Stop must not.
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Stop took %v with a claim stuck on a dead connection", took)
	}
}

// A message whose write breaks a deferred constraint fails only at COMMIT. In
// a batch, the others then run again one per transaction, uncharged, so only
// the culprit spends attempts and ends DEAD.
func TestDeferredConstraintChargesOnlyTheCulprit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	_, err := pool.Exec(ctx, `CREATE TABLE parents (id text PRIMARY KEY);
		INSERT INTO parents VALUES ('p');
		CREATE TABLE children (message_id text NOT NULL, parent text NOT NULL
			REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)`)
	is.NoErr(err)
	c := newClient(t, pool, inbox.Config{MaxAttempts: 3})
	for i := range 6 {
		acceptAll(t, c, orderMsg(fmt.Sprintf("evt-%d", i), map[string]int{"n": i}))
	}
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		parent := "p"
		if m.MessageID == "evt-3" {
			parent = "missing" // checked only at COMMIT
		}
		_, err := m.Tx.Exec(ctx, "INSERT INTO children VALUES ($1, $2)", m.MessageID, parent)
		return err
	}), inbox.WorkerConfig{Concurrency: 1, MessagesPerTx: 6, ClaimBatch: 6, PollInterval: 50 * time.Millisecond,
		Backoff: func(int) time.Duration { return 0 }})
	startWorker(t, w) // a started worker batches; Drain runs one message per transaction
	testkit.Eventually(t, 20*time.Second, func() bool {
		return countRows(t, pool, "status IN ('COMPLETED', 'DEAD')") == 6
	}, "every receipt settled")
	is.Equal(countRows(t, pool, "status = 'COMPLETED' AND attempts = 1"), 5)
	var status, lastError string
	var attempts int
	is.NoErr(pool.QueryRow(ctx, "SELECT status, attempts, last_error FROM pginbox_receipts_live WHERE message_id = 'evt-3'").Scan(&status, &attempts, &lastError))
	is.Equal(status, "DEAD")
	is.Equal(attempts, 3)
	is.True(strings.Contains(lastError, "foreign key"))
	var children int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM children").Scan(&children))
	is.Equal(children, 5)
}

// The handler transaction's timeouts are HandlerTimeout plus a second,
// whatever the batch size: the longest HandlerTimeout works with the largest
// batches.
func TestLongestHandlerTimeoutWorksWithBatches(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	first := acceptAll(t, c, orderMsg("first", map[string]int{"n": 0}))[0]
	entered, proceed := make(chan struct{}), make(chan struct{})
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		if m.ReceiptID == first {
			close(entered)
			<-proceed // while the only slot is busy, the queue fills
		}
		return nil
	}), inbox.WorkerConfig{Concurrency: 1, MessagesPerTx: inbox.MaxMessagesPerTx, ClaimBatch: 100,
		HandlerTimeout: inbox.MaxHandlerTimeout, PollInterval: 20 * time.Millisecond})
	startWorker(t, w)
	<-entered
	const n = 30 // one transaction of 30 x 24h in milliseconds is beyond PostgreSQL's largest timeout
	for i := range n {
		acceptAll(t, c, orderMsg(fmt.Sprint("evt-", i), map[string]int{"n": i}))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return countRows(t, pool, "status = 'PROCESSING'") == n+1 },
		"the %d messages claimed into the queue", n)
	close(proceed)
	testkit.Eventually(t, 10*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == n+1 }, "every receipt COMPLETED")
	if failed := countRows(t, pool, "attempts > 1"); failed != 0 {
		t.Fatalf("%d receipts needed more than one attempt: the batch's transaction could not start", failed)
	}
}

// m.Tx refuses Commit and Rollback: the worker owns the transaction. A handler
// that tries goes DEAD (a programming error) and its writes roll back.
func TestHandlerCannotEndItsTransaction(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})
	acceptAll(t, c, orderMsg("commit", map[string]int{"n": 1}), orderMsg("rollback", map[string]int{"n": 2}),
		orderMsg("savepoint", map[string]int{"n": 3}), orderMsg("swallow", map[string]int{"n": 4}))
	var refused sync.Map
	logger, rec := newLogRecorder(t)
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		if err := writeEffect(ctx, m, "w"); err != nil {
			return err
		}
		switch m.MessageID {
		case "commit":
			refused.Store(m.MessageID, m.Tx.Commit(ctx))
			return nil // ignores the refusal: still DEAD
		case "rollback":
			err := m.Tx.Rollback(ctx)
			refused.Store(m.MessageID, err)
			return err
		case "savepoint":
			// Nested transactions are savepoints the handler may end.
			sp, err := m.Tx.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := sp.Exec(ctx, "INSERT INTO effects VALUES ('nested', $1, 'w', 0)", m.ReceiptID); err != nil {
				return err
			}
			return sp.Commit(ctx)
		case "swallow":
			if m.Attempt == 1 {
				m.Tx.Exec(ctx, "SELECT 1/0") // fails, and the handler pretends it did not
			}
		}
		return nil
	}), inbox.WorkerConfig{Backoff: func(int) time.Duration { return 0 }, Logger: logger})
	_, err := w.Drain(ctx)
	is.NoErr(err)
	for _, id := range []string{"commit", "rollback"} {
		v, _ := refused.Load(id)
		is.True(errors.Is(v.(error), handler.ErrTxOwnedByWorker))
		var status, lastError string
		is.NoErr(pool.QueryRow(ctx, "SELECT status, last_error FROM pginbox_receipts_live WHERE message_id = $1", id).Scan(&status, &lastError))
		is.Equal(status, "DEAD")
		is.True(strings.Contains(lastError, "the worker owns the handler's transaction"))
	}
	is.Equal(effectCount(t, pool, "message_id IN ('commit', 'rollback')"), 0)
	is.Equal(effectCount(t, pool, "message_id IN ('savepoint', 'nested')"), 2)
	// The first attempt of the handler that hid its failed statement failed
	// (COMMIT would have rolled everything back); the retry completed.
	var status string
	var attempts int
	is.NoErr(pool.QueryRow(ctx, "SELECT status, attempts FROM pginbox_receipts_live WHERE message_id = 'swallow'").Scan(&status, &attempts))
	is.Equal(status, "COMPLETED")
	is.Equal(attempts, 2)
	is.True(rec.logged("handler failed, will retry"))
}

// A handler that ends the transaction with SQL commits its writes together
// with the completion (the completion runs first), so a retry cannot apply
// them again.
func TestHandlerCommittingBySQLAppliesOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})
	id := acceptAll(t, c, orderMsg("sql-commit", map[string]int{"n": 1}))[0]
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		if err := writeEffect(ctx, m, "w"); err != nil {
			return err
		}
		_, err := m.Tx.Exec(ctx, "COMMIT")
		is.NoErr(err)
		return errors.New("and then it failed")
	}), inbox.WorkerConfig{Backoff: func(int) time.Duration { return 0 }})
	for range 5 {
		_, err := w.Drain(ctx)
		is.NoErr(err)
	}
	is.Equal(effectCount(t, pool, "true"), 1)
	is.Equal(stateOf(t, pool, id).Status, "COMPLETED")
}

// An operator may requeue a PROCESSING receipt whose lease expired and that
// no handler runs (its worker is gone); a live claim or a running handler is
// refused at once, never waited for.
func TestRequeueProcessingReceipts(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ids := acceptAll(t, c, orderMsg("gone", map[string]int{"n": 1}), orderMsg("held", map[string]int{"n": 2}))
	ops := admNew(t, pool).Operator()
	// A worker that died after claiming: expired lease, no transaction.
	inboxtest.SetState(t, pool, ids[0], "status = 'PROCESSING', lease_expires_at = now() - interval '1 second', attempts = 1, version = version + 1")
	// A live claim.
	inboxtest.SetState(t, pool, ids[1], "status = 'PROCESSING', lease_expires_at = now() + interval '1 hour', attempts = 1, version = version + 1")

	res, err := ops.Requeue(ctx, ids[0], inbox.ChangeParams{ExpectedVersion: 2, Actor: "ops", Reason: "worker host died"})
	is.NoErr(err)
	is.Equal(res.FromStatus, inbox.StatusProcessing)
	st := stateOf(t, pool, ids[0])
	is.Equal(st.Status, "PENDING")
	is.Equal(st.Attempts, 0)

	_, err = ops.Requeue(ctx, ids[1], inbox.ChangeParams{ExpectedVersion: 2, Actor: "ops", Reason: "impatient"})
	var wrong *inbox.WrongStateError
	is.True(errors.As(err, &wrong))
	is.True(strings.Contains(err.Error(), "a worker holds it until its lease expires"))

	// A running handler past its lease: refused without waiting for it.
	c2 := orderMsg("running", map[string]int{"n": 3})
	running := acceptAll(t, c, c2)[0]
	entered, unblock := make(chan struct{}), make(chan struct{})
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		if m.ReceiptID == running {
			close(entered)
			<-unblock
		}
		return nil
	}), inbox.WorkerConfig{Lease: inbox.MinLease})
	inbox.StallHeartbeat(w)
	drained := make(chan error, 1)
	go func() {
		_, err := w.Drain(ctx)
		drained <- err
	}()
	<-entered
	waitLeaseExpired(t, pool, running)
	version := stateOf(t, pool, running).Version
	_, err = ops.Requeue(ctx, running, inbox.ChangeParams{ExpectedVersion: version, Actor: "ops", Reason: "looks stuck"})
	close(unblock)
	is.True(errors.As(err, &wrong))
	is.True(strings.Contains(err.Error(), "a handler's transaction is running it right now"))
	is.NoErr(<-drained)
	is.Equal(stateOf(t, pool, running).Status, "COMPLETED")
}

// Purge refuses cutoffs that would purge what a retention period must keep.
func TestPurgeRefusesAbsurdParams(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	ops := admNew(t, pool).Operator()
	for _, p := range []inbox.PurgeParams{
		{Before: time.Now().Add(time.Hour)},
		{OlderThan: inbox.MaxPurgeAge + time.Hour},
		{OlderThan: time.Hour, Pause: -time.Second},
		{OlderThan: time.Hour, Pause: 2 * time.Hour},
	} {
		_, err := ops.Purge(context.Background(), p)
		var verr *inbox.ValidationError
		if !errors.As(err, &verr) {
			t.Fatalf("Purge(%+v) = %v, want a *ValidationError", p, err)
		}
	}
}

package inbox_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// saturatedApp names the sessions of the small pools below.
const saturatedApp = "pginbox-fault-saturated"

func smallPool(maxConns int32) func(*pgxpool.Config) {
	return func(c *pgxpool.Config) {
		c.MaxConns = maxConns
		c.ConnConfig.RuntimeParams["application_name"] = saturatedApp
	}
}

// TestFaultPoolSaturationQueuesAccepts: 200 concurrent callers on a pool of 4
// connections wait their turn; none fails, and the 100 identities (each
// delivered twice at once) end up as one receipt each.
func TestFaultPoolSaturationQueuesAccepts(t *testing.T) {
	t.Parallel()
	const (
		callers    = 200
		identities = callers / 2
	)
	direct, dsn := newPool(t)
	pool := poolFor(t, dsn, smallPool(4))
	c := newClient(t, pool, inbox.Config{})

	var maxTotal atomic.Int32
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if n := pool.Stat().TotalConns(); n > maxTotal.Load() {
				maxTotal.Store(n)
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	start := make(chan struct{})
	results := make([]delivery, callers)
	var wg sync.WaitGroup
	for k := range callers {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := c.Accept(ctx, faultMsg(k%identities))
			results[k] = delivery{i: k % identities, res: res, err: err}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	close(stopWatch)
	<-watched

	accepted := map[int]int{}
	ids := map[int]inbox.ID{}
	for _, d := range results {
		if d.err != nil {
			t.Errorf("message %d: %v", d.i, d.err)
			continue
		}
		if d.res.Outcome == inbox.Accepted {
			accepted[d.i]++
		}
		if prev, ok := ids[d.i]; ok && prev != d.res.ID {
			t.Errorf("message %d reported as receipts %s and %s", d.i, prev, d.res.ID)
		}
		ids[d.i] = d.res.ID
	}
	for i := range identities {
		if accepted[i] != 1 {
			t.Errorf("message %d Accepted %d times, want 1 (the other copy Duplicate)", i, accepted[i])
		}
	}
	stored := receiptIDs(t, direct)
	if len(stored) != identities {
		t.Fatalf("%d receipts, want %d", len(stored), identities)
	}
	for i, id := range ids {
		if stored[faultMsgID(i)] != id {
			t.Errorf("message %d: stored %s, reported %s", i, stored[faultMsgID(i)], id)
		}
	}
	st := pool.Stat()
	t.Logf("%d callers on %d connections in %v: %d acquires waited for a connection (%v in total); at most %d connections",
		callers, st.MaxConns(), elapsed.Round(time.Millisecond), st.EmptyAcquireCount(), st.EmptyAcquireWaitTime().Round(time.Millisecond), maxTotal.Load())
	if maxTotal.Load() > 4 {
		t.Errorf("the pool opened %d connections, above MaxConns 4", maxTotal.Load())
	}
	if st.EmptyAcquireCount() == 0 {
		t.Error("no caller waited for a connection: the pool was not saturated")
	}
}

// TestFaultPoolSaturationDeadlines: with a short per-call deadline on a
// saturated pool, a call that times out waiting for a connection was never
// sent. It must say Retry, must not claim an uncertain commit, and must leave
// nothing behind. A call that timed out after sending says ErrCommitUncertain
// and reconciles on redelivery.
func TestFaultPoolSaturationDeadlines(t *testing.T) {
	t.Parallel()
	const callDeadline = 50 * time.Millisecond

	t.Run("every connection busy", func(t *testing.T) {
		const callers = 50
		direct, dsn := newPool(t)
		pool := poolFor(t, dsn, smallPool(4))
		c := newClient(t, pool, inbox.Config{})
		// Saturate deterministically: the test holds all 4 connections.
		var held []*pgxpool.Conn
		for range 4 {
			conn, err := pool.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, conn)
		}
		canceledBefore := pool.Stat().CanceledAcquireCount()

		errs := make([]error, callers)
		took := make([]time.Duration, callers)
		var wg sync.WaitGroup
		for k := range callers {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
				defer cancel()
				t0 := time.Now()
				_, errs[k] = c.Accept(ctx, faultMsg(k))
				took[k] = time.Since(t0)
			})
		}
		wg.Wait()
		for k, err := range errs {
			switch {
			case err == nil:
				t.Errorf("call %d succeeded with no free connection", k)
			case errors.Is(err, inbox.ErrCommitUncertain):
				t.Errorf("call %d: %v: it was never sent, so it certainly did not commit", k, err)
			case inbox.ActionFor(err) != inbox.ActionRetry:
				t.Errorf("call %d: action %v for %v, want retry", k, inbox.ActionFor(err), err)
			case !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("call %d: %v does not say the deadline passed", k, err)
			}
			if took[k] > callDeadline+2*time.Second {
				t.Errorf("call %d took %v with a %v deadline", k, took[k], callDeadline)
			}
		}
		if n := pool.Stat().CanceledAcquireCount() - canceledBefore; n != callers {
			t.Errorf("%d acquires cancelled, want %d (every call timed out waiting for a connection)", n, callers)
		}
		if n := countRows(t, direct, "true"); n != 0 {
			t.Fatalf("%d receipts from calls that were never sent", n)
		}
		for _, conn := range held {
			conn.Release()
		}
		for k := range callers {
			if res, _ := redeliver(t, c, faultMsg(k), 3); res.Outcome != inbox.Accepted {
				t.Errorf("redelivery %d: %v, want Accepted", k, res.Outcome)
			}
		}
		if n := countRows(t, direct, "true"); n != callers {
			t.Fatalf("%d receipts, want %d", n, callers)
		}
	})

	t.Run("connections stuck on a lock", func(t *testing.T) {
		// The 4 connections are busy with accepts that wait on a table lock
		// (as under a slow disk or lock contention); 200 callers arrive over
		// 300ms while the lock is held for the first 150ms. Some calls time out
		// waiting for a connection, some after sending, the rest succeed.
		const (
			callers = 200
			spread  = 300 * time.Millisecond
			locked  = 150 * time.Millisecond
		)
		direct, dsn := newPool(t)
		pool := poolFor(t, dsn, smallPool(4))
		c := newClient(t, pool, inbox.Config{})
		ctx := context.Background()
		// Open all 4 connections first, so the first callers send at once.
		var warm []*pgxpool.Conn
		for range 4 {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			warm = append(warm, conn)
		}
		for _, conn := range warm {
			conn.Release()
		}
		canceledBefore := pool.Stat().CanceledAcquireCount()

		lockTx, err := direct.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lockTx.Rollback(ctx)
		if _, err := lockTx.Exec(ctx, "LOCK TABLE pginbox_receipts IN SHARE MODE"); err != nil {
			t.Fatal(err)
		}
		unlocked := make(chan error, 1)
		go func() {
			time.Sleep(locked) // the lock's length is the fault the callers' deadlines meet
			unlocked <- lockTx.Commit(ctx)
		}()

		results := make([]delivery, callers)
		var wg sync.WaitGroup
		for k := range callers {
			wg.Go(func() {
				time.Sleep(spread * time.Duration(k) / callers) // pacing: the callers arrive spread over the lock
				cctx, cancel := context.WithTimeout(ctx, callDeadline)
				defer cancel()
				res, err := c.Accept(cctx, faultMsg(k))
				results[k] = delivery{i: k, res: res, err: err}
			})
		}
		wg.Wait()
		if err := <-unlocked; err != nil {
			t.Fatal(err)
		}
		// Accepts abandoned after sending may still be running, or may commit
		// once the lock is gone: wait until the server is done with them.
		waitSettled(t, nil, direct, saturatedApp, false)

		stored := receiptIDs(t, direct)
		var ok, neverSent, uncertain []int
		for _, d := range results {
			switch {
			case d.err == nil:
				ok = append(ok, d.i)
				if stored[faultMsgID(d.i)] != d.res.ID {
					t.Errorf("call %d acknowledged receipt %s, stored %s", d.i, d.res.ID, stored[faultMsgID(d.i)])
				}
			case inbox.ActionFor(d.err) != inbox.ActionRetry:
				t.Errorf("call %d: action %v for %v, want retry", d.i, inbox.ActionFor(d.err), d.err)
			case errors.Is(d.err, inbox.ErrCommitUncertain):
				uncertain = append(uncertain, d.i)
			default:
				neverSent = append(neverSent, d.i)
				if id, found := stored[faultMsgID(d.i)]; found {
					t.Errorf("call %d failed as never sent (%v) but receipt %s exists", d.i, d.err, id)
				}
			}
		}
		canceled := pool.Stat().CanceledAcquireCount() - canceledBefore
		t.Logf("%d succeeded, %d timed out before sending (%d while waiting for a connection), %d timed out after sending",
			len(ok), len(neverSent), canceled, len(uncertain))
		if canceled == 0 || int64(len(neverSent)) < canceled {
			t.Errorf("%d acquires cancelled, %d calls failed unsent: want some, and every cancelled acquire among them", canceled, len(neverSent))
		}
		if len(uncertain) == 0 {
			t.Error("no call timed out after sending: the connections were not stuck on the lock")
		}

		// The transport redelivers every failure.
		lostCommits := 0
		for _, i := range append(neverSent, uncertain...) {
			res, _ := redeliver(t, c, faultMsg(i), 3)
			id, found := stored[faultMsgID(i)]
			switch {
			case found && (res.Outcome != inbox.Duplicate || res.ID != id):
				t.Errorf("redelivery %d: %v %s, want Duplicate of %s", i, res.Outcome, res.ID, id)
			case found:
				lostCommits++
			case res.Outcome != inbox.Accepted:
				t.Errorf("redelivery %d: %v, want Accepted", i, res.Outcome)
			}
		}
		t.Logf("%d of the calls that timed out after sending had committed", lostCommits)
		if n := len(receiptIDs(t, direct)); n != callers {
			t.Fatalf("%d receipts, want %d", n, callers)
		}
	})
}

// TestFaultWorkerOnSaturatedPool: a worker shares the smallest pool NewWorker
// allows (MaxConns = Concurrency + 2) with a heavy Accept load. Claims,
// heartbeats and handler transactions queue for connections with the accepts;
// the worker must still complete everything, once.
func TestFaultWorkerOnSaturatedPool(t *testing.T) {
	t.Parallel()
	const (
		concurrency = 2
		backlog     = 100
		senders     = 24
		load        = time.Second
	)
	ctx := context.Background()
	direct, dsn := newPool(t)
	setupEffects(t, direct)
	pool := poolFor(t, dsn, smallPool(concurrency+2))
	c := newClient(t, pool, inbox.Config{})
	for i := range backlog {
		if _, err := c.Accept(ctx, faultMsg(i)); err != nil {
			t.Fatal(err)
		}
	}

	fn := func(ctx context.Context, m *handler.Msg) error {
		if err := writeEffect(ctx, m, "w"); err != nil {
			return err
		}
		return nil
	}
	logger, rec := newLogRecorder(t)
	w := newWorker(t, pool, registry(t, fn), inbox.WorkerConfig{
		Concurrency:  concurrency,
		Lease:        time.Second,
		PollInterval: 50 * time.Millisecond,
		Backoff:      func(int) time.Duration { return 50 * time.Millisecond },
		Logger:       logger,
	})
	emptyBefore := pool.Stat().EmptyAcquireCount()
	startWorker(t, w)

	// The load: one accept in five is a new message, the rest redeliveries,
	// so the pool stays saturated without an endless backlog.
	var next, calls atomic.Int64
	next.Store(backlog)
	stop := time.Now().Add(load)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for time.Now().Before(stop) {
				var i int
				if rand.IntN(5) == 0 {
					i = int(next.Add(1) - 1)
				} else {
					i = rand.IntN(int(next.Load()))
				}
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := c.Accept(cctx, faultMsg(i))
				cancel()
				calls.Add(1)
				if err != nil {
					t.Errorf("accept %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := int(next.Load())
	completedDuringLoad := countRows(t, direct, "status = 'COMPLETED'")
	st := pool.Stat()
	t.Logf("%d accepts (%d new messages) by %d senders during %v; %d receipts completed meanwhile; %d acquires waited for a connection (%v in total)",
		calls.Load(), total-backlog, senders, load, completedDuringLoad, st.EmptyAcquireCount()-emptyBefore, st.EmptyAcquireWaitTime().Round(time.Millisecond))
	if st.EmptyAcquireCount()-emptyBefore < int64(senders) {
		t.Errorf("only %d acquires waited for a connection: the pool was not saturated", st.EmptyAcquireCount()-emptyBefore)
	}
	if completedDuringLoad == 0 {
		t.Error("the worker completed nothing while the pool was saturated")
	}

	testkit.Eventually(t, 60*time.Second, func() bool {
		return countRows(t, direct, "status = 'COMPLETED'") == total
	}, "every receipt to complete")
	t.Logf("attempts: %s", attemptSummary(t, direct))
	requireOneEffectPerReceipt(t, direct, total)
	if rec.logged("recovered an expired lease") {
		t.Log("note: a lease expired under saturation (heartbeat starved); the receipt was retried")
	}
}

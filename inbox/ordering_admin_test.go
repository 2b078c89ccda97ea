package inbox_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
)

func orderedIDs(t testing.TB, c *inbox.Client, key string, from, to int) []inbox.ID {
	t.Helper()
	var ids []inbox.ID
	for n := from; n <= to; n++ {
		res, err := c.Accept(context.Background(), orderedMsg(inbox.Tenant("t1"), key, n))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != inbox.Accepted || res.Status != inbox.StatusPending {
			t.Fatalf("accept %s/%d: %+v", key, n, res)
		}
		ids = append(ids, res.ID)
	}
	return ids
}

// The head fails twice and retries with backoff: the next receipt of its
// key waits meanwhile, then runs after it.
func TestOrderingKeyRetryKeepsTheHeadFirst(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	var attempts atomic.Int32
	reg := orderedRegistry(t, pool, func(ctx context.Context, m *handler.Msg, p orderedPayload) error {
		if p.OrderID == "k" && p.N == 1 && attempts.Add(1) <= 2 {
			return errors.New("downstream not ready")
		}
		return nil
	})
	orderedIDs(t, c, "k", 1, 3)
	orderedIDs(t, c, "other", 1, 2) // another key runs meanwhile
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 4, PollInterval: 20 * time.Millisecond,
		Backoff: func(int) time.Duration { return 200 * time.Millisecond }})
	startWorker(t, w)
	testkit.Eventually(t, 20*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == 5 }, "all handled")
	got := handledOrder(t, pool)
	is.Equal(got["k"], []int{1, 2, 3})
	is.Equal(got["other"], []int{1, 2})
	is.Equal(attempts.Load(), int32(3))
}

// A DEAD head blocks its key (stats count the receipts behind it); Skip
// lets the next one run and leaves the skipped one DEAD, audited.
func TestOrderingKeyDeadHeadBlocksUntilSkipped(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	trace := &claimTrace{}
	pool, _ := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = trace })
	c := newClient(t, pool, inbox.Config{})
	reg := orderedRegistry(t, pool, func(ctx context.Context, m *handler.Msg, p orderedPayload) error {
		if p.N == 1 {
			return handler.Permanent(errors.New("cannot apply"))
		}
		return nil
	})
	ids := orderedIDs(t, c, "k", 1, 3)
	unkeyed, err := c.Accept(ctx, orderMsg("evt-unkeyed", raw(`{"orderId":"u","n":0}`)))
	is.NoErr(err)
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 4, PollInterval: 20 * time.Millisecond})
	startWorker(t, w)
	waitStatus(t, pool, ids[0], "DEAD", 10*time.Second)
	testkit.Eventually(t, 10*time.Second, func() bool { return stateOf(t, pool, unkeyed.ID).Status == "COMPLETED" }, "the unkeyed receipt")
	trace.waitClaims(t, 3) // several polls, none of which may take the key's next receipt
	is.Equal(len(handledOrder(t, pool)["k"]), 0)

	admin := admNew(t, pool).Operator()
	r2, err := admin.Get(ctx, ids[1])
	is.NoErr(err)
	is.Equal(r2.Status, inbox.StatusPending)
	is.True(r2.Blocked)
	is.Equal(r2.OrderingKey, "k")
	is.Equal(r2.OrderingSeq, int64(2))
	stats, err := admin.Stats(ctx, inbox.StatsParams{})
	is.NoErr(err)
	is.Equal(stats.Blocked, int64(2))
	is.Equal(stats.Consumers[0].Blocked, int64(2))
	is.Equal(stats.Consumers[0].Pending, int64(2))
	is.Equal(stats.Consumers[0].Dead, int64(1))

	dead, err := admin.Get(ctx, ids[0])
	is.NoErr(err)
	is.Equal(dead.KeyBlocked, int64(2)) // both later receipts wait behind it
	is.Equal(r2.KeyBlocked, int64(1))   // the third waits behind the second
	p := inbox.ChangeParams{ExpectedVersion: dead.Version, Actor: "ops", Reason: "bad event, skipping"}
	// Refusals change nothing.
	_, err = admin.Skip(ctx, ids[0], inbox.ChangeParams{ExpectedVersion: dead.Version - 1, Actor: "ops", Reason: "x"})
	var conflict *inbox.VersionConflictError
	is.True(errors.As(err, &conflict))
	_, err = admin.Skip(ctx, ids[1], inbox.ChangeParams{ExpectedVersion: r2.Version, Actor: "ops", Reason: "x"})
	is.True(errors.Is(err, inbox.ErrWrongState)) // waiting, not DEAD
	is.True(strings.Contains(err.Error(), "it is PENDING"))
	is.True(strings.Contains(err.Error(), "waits behind an earlier receipt of its ordering key"))
	_, err = admin.Requeue(ctx, ids[1], inbox.ChangeParams{ExpectedVersion: r2.Version, Actor: "ops", Reason: "x"})
	is.True(errors.Is(err, inbox.ErrWrongState)) // a waiting receipt cannot jump its key's queue
	is.Equal(admAudit(t, pool), 0)

	res, err := admin.Skip(ctx, ids[0], p)
	is.NoErr(err)
	is.Equal(res.OrderingKey, "k")
	is.True(res.Promoted)
	is.True(res.Version > dead.Version)
	testkit.Eventually(t, 10*time.Second, func() bool { return len(handledOrder(t, pool)["k"]) == 2 }, "the rest of the key")
	is.Equal(handledOrder(t, pool)["k"], []int{2, 3})
	is.Equal(stateOf(t, pool, ids[0]).Status, "DEAD")
	details, err := admin.Get(ctx, ids[0])
	is.NoErr(err)
	is.Equal(len(details.Audit), 1)
	is.Equal(details.Audit[0].Action, inbox.AuditSkip)
	is.Equal(details.Audit[0].Actor, "ops")
	is.Equal(details.KeyBlocked, int64(0))

	// Skipped already: refused.
	_, err = admin.Skip(ctx, ids[0], inbox.ChangeParams{ExpectedVersion: res.Version, Actor: "ops", Reason: "again"})
	is.True(errors.Is(err, inbox.ErrWrongState))
	// A new message of the key runs at once: the skipped one holds nothing back.
	orderedIDs(t, c, "k", 4, 4)
	testkit.Eventually(t, 10*time.Second, func() bool { return len(handledOrder(t, pool)["k"]) == 3 }, "the new message")
}

// A requeued DEAD head runs first again, then the rest of its key.
func TestOrderingKeyRequeueOfTheDeadHeadRestoresOrder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	trace := &claimTrace{}
	pool, _ := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = trace })
	c := newClient(t, pool, inbox.Config{})
	var fixed atomic.Bool
	reg := orderedRegistry(t, pool, func(ctx context.Context, m *handler.Msg, p orderedPayload) error {
		if p.N == 1 && !fixed.Load() {
			return handler.Permanent(errors.New("cannot apply yet"))
		}
		return nil
	})
	ids := orderedIDs(t, c, "k", 1, 3)
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 4, PollInterval: 20 * time.Millisecond})
	startWorker(t, w)
	waitStatus(t, pool, ids[0], "DEAD", 10*time.Second)
	trace.waitClaims(t, 3) // polls that must leave the key's next receipts waiting
	fixed.Store(true)
	admin := admNew(t, pool).Operator()
	dead, err := admin.Get(ctx, ids[0])
	is.NoErr(err)
	_, err = admin.Requeue(ctx, ids[0], inbox.ChangeParams{ExpectedVersion: dead.Version, Actor: "ops", Reason: "fixed"})
	is.NoErr(err)
	testkit.Eventually(t, 10*time.Second, func() bool { return len(handledOrder(t, pool)["k"]) == 3 }, "the key")
	is.Equal(handledOrder(t, pool)["k"], []int{1, 2, 3})
}

// A worker that claimed the head and vanished: recovery gives it back once
// its lease expires, and it still runs first.
func TestOrderingKeyLeaseExpiryKeepsTheHeadFirst(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	reg := orderedRegistry(t, pool, nil)
	ids := orderedIDs(t, c, "k", 1, 3)
	inboxtest.SetState(t, pool, ids[0], "status = 'PROCESSING', lease_expires_at = now() + interval '500 milliseconds', attempts = 1")
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 4, PollInterval: 20 * time.Millisecond,
		Lease: time.Second, RecoverInterval: 100 * time.Millisecond})
	startWorker(t, w)
	testkit.Eventually(t, 20*time.Second, func() bool { return len(handledOrder(t, pool)["k"]) == 3 }, "the key")
	is.Equal(handledOrder(t, pool)["k"], []int{1, 2, 3})
	is.Equal(stateOf(t, pool, ids[0]).Attempts, 2)
}

// A replay of an ordered receipt goes to the back of its key's queue; a
// redelivery of an accepted message gets no new place.
func TestOrderingKeyReplayGoesToTheBack(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	reg := orderedRegistry(t, pool, nil)
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 4})
	ids := orderedIDs(t, c, "k", 1, 2)
	_, err := w.Drain(ctx)
	is.NoErr(err)

	orderedIDs(t, c, "k", 3, 3)
	dup, err := c.Accept(ctx, orderedMsg(inbox.Tenant("t1"), "k", 2))
	is.NoErr(err)
	is.Equal(dup.Outcome, inbox.Duplicate)
	admin := admNew(t, pool).Operator()
	orig, err := admin.Get(ctx, ids[0])
	is.NoErr(err)
	rep, err := admin.Replay(ctx, ids[0], inbox.ChangeParams{ExpectedVersion: orig.Version, Actor: "ops", Reason: "rebuild"})
	is.NoErr(err)
	orderedIDs(t, c, "k", 4, 4)
	replay, err := admin.Get(ctx, rep.NewID)
	is.NoErr(err)
	is.Equal(replay.OrderingKey, "k")
	is.Equal(replay.OrderingSeq, int64(4)) // after 1, 2, 3; the duplicate took none
	is.True(replay.Blocked)

	for {
		n, err := w.Drain(ctx)
		is.NoErr(err)
		if n == 0 {
			break
		}
	}
	is.Equal(handledOrder(t, pool)["k"], []int{1, 2, 3, 1, 4})
}

// An ordering key follows the identity string rules: a bad one is an
// invalid message (reject), stored nowhere.
func TestOrderingKeyIsValidated(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	for _, key := range []string{strings.Repeat("k", inbox.MaxIdentityBytes+1), "a\x00b", "tab\there", "\xff"} {
		m := orderedMsg(inbox.Tenant("t1"), "k", 1)
		m.OrderingKey = key
		_, err := c.Accept(ctx, m)
		var verr *inbox.ValidationError
		is.True(errors.As(err, &verr))
		is.Equal(verr.Field, "ordering_key")
		is.Equal(inbox.ActionFor(err), inbox.ActionReject)
		items, err := c.AcceptBatch(ctx, []inbox.Message{m})
		is.NoErr(err)
		is.Equal(items[0].Outcome, inbox.Invalid)
	}
	is.Equal(countRows(t, pool, "true"), 0)
}

// AcceptTx and AcceptBatchTx queue keyed messages in the caller's
// transaction (a rollback leaves no number taken); a batch ranks messages of
// one key in batch order, resolves repeats of an identity to the first, and
// mixes in unkeyed messages.
func TestOrderingKeyInCallerTransactionsAndBatches(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	reg := orderedRegistry(t, pool, nil)
	scope := inbox.Tenant("t1")

	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	_, err = c.AcceptTx(ctx, tx, orderedMsg(scope, "k", 99))
	is.NoErr(err)
	is.NoErr(tx.Rollback(ctx))

	tx, err = pool.Begin(ctx)
	is.NoErr(err)
	res, err := c.AcceptTx(ctx, tx, orderedMsg(scope, "k", 1))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	plain := orderedMsg(scope, "plain", 0)
	plain.OrderingKey = ""
	items, err := c.AcceptBatchTx(ctx, tx, []inbox.Message{
		orderedMsg(scope, "k", 2), plain,
		orderedMsg(scope, "k", 3), orderedMsg(scope, "k", 2), orderedMsg(scope, "k", 1),
	})
	is.NoErr(err)
	is.NoErr(tx.Commit(ctx))
	outcomes := make([]inbox.Outcome, len(items))
	for i, it := range items {
		outcomes[i] = it.Outcome
	}
	is.Equal(outcomes, []inbox.Outcome{inbox.Accepted, inbox.Accepted, inbox.Accepted, inbox.Duplicate, inbox.Duplicate})
	is.Equal(items[3].ID, items[0].ID)
	is.Equal(items[4].ID, res.ID)
	is.Equal(items[4].Status, inbox.StatusPending)

	admin := admNew(t, pool).Operator()
	for i, id := range []inbox.ID{res.ID, items[0].ID, items[2].ID} {
		r, err := admin.Get(ctx, id)
		is.NoErr(err)
		is.Equal(r.OrderingSeq, int64(i+1)) // the rolled-back accept took no number
		is.Equal(r.Blocked, i > 0)
	}
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 4})
	for {
		n, err := w.Drain(ctx)
		is.NoErr(err)
		if n == 0 {
			break
		}
	}
	is.Equal(handledOrder(t, pool)["k"], []int{1, 2, 3})
	is.Equal(countRows(t, pool, "status = 'COMPLETED'"), 4)
}

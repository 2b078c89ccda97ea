package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

type concurrentCall struct {
	msg inbox.Message
	res inbox.AcceptResult
	err error
}

// acceptConcurrently runs one Accept per message, all at once, and returns the results
// in message order.
func acceptConcurrently(c *inbox.Client, msgs []inbox.Message) []concurrentCall {
	out := make([]concurrentCall, len(msgs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := c.Accept(context.Background(), m)
			out[i] = concurrentCall{msg: m, res: res, err: err}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func TestGroupCommitGivesEveryCallItsOwnResult(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]inbox.Config{
		"defaults":           {GroupCommit: true},
		"small batches wait": {GroupCommit: true, GroupCommitMaxBatch: 7, GroupCommitMaxWait: 2 * time.Millisecond, GroupCommitFlushers: 3},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			pool, _ := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 4 })
			c := newClient(t, pool, cfg)

			// Stored before the storm: one redelivered, one redelivered with
			// changed content.
			old, err := c.Accept(ctx, orderMsg("evt-old", raw(`{"v":1}`)))
			is.NoErr(err)
			target, err := c.Accept(ctx, orderMsg("evt-target", raw(`{"v":1}`)))
			is.NoErr(err)

			// 1,000 calls: 550 distinct new identities, 175 of them delivered
			// twice more, 97 redeliveries of evt-old, 2 invalid and 1 conflict.
			var msgs []inbox.Message
			for i := range 550 {
				m := orderMsg(fmt.Sprintf("evt-%d", i), map[string]int{"n": i})
				msgs = append(msgs, m)
				if i < 175 {
					msgs = append(msgs, m, m)
				}
			}
			for range 97 {
				msgs = append(msgs, orderMsg("evt-old", raw(`{ "v" : 1 }`)))
			}
			msgs = append(msgs,
				orderMsg("evt-bad", raw(`{"v":NaN}`)),
				orderMsg("", raw(`{}`)),
				orderMsg("evt-target", raw(`{"v":2}`)),
			)
			is.Equal(len(msgs), 1000)

			results := acceptConcurrently(c, msgs)
			accepted := map[string]inbox.ID{}
			ids := map[string]map[inbox.ID]bool{}
			var dups, invalid, conflicts int
			for _, r := range results {
				id := r.msg.MessageID
				switch {
				case errors.Is(r.err, inbox.ErrInvalid):
					invalid++
				case errors.Is(r.err, inbox.ErrIdentityConflict):
					conflicts++
					var ce *inbox.ConflictError
					is.True(errors.As(r.err, &ce))
					is.Equal(ce.ReceiptID, target.ID)
					is.Equal(inbox.ActionFor(r.err), inbox.ActionReject)
				case r.err != nil:
					t.Fatalf("%s: %v", id, r.err)
				case r.res.Outcome == inbox.Accepted:
					if _, twice := accepted[id]; twice {
						t.Fatalf("%s accepted twice", id)
					}
					accepted[id] = r.res.ID
					is.Equal(r.res.Status, inbox.StatusPending)
				default:
					is.Equal(r.res.Outcome, inbox.Duplicate)
					dups++
				}
				if r.err == nil {
					if ids[id] == nil {
						ids[id] = map[inbox.ID]bool{}
					}
					ids[id][r.res.ID] = true
				}
			}
			is.Equal(len(accepted), 550)
			is.Equal(dups, 350+97)
			is.Equal(invalid, 2)
			is.Equal(conflicts, 1)
			for id, set := range ids {
				is.Equal(len(set), 1) // every call of an identity names the same receipt
				if id == "evt-old" {
					is.True(set[old.ID])
				} else {
					is.True(set[accepted[id]])
				}
			}
			is.Equal(countRows(t, pool, "true"), 552)

			// Calls really shared transactions: far fewer transactions than rows.
			var txns int
			is.NoErr(pool.QueryRow(ctx, "SELECT count(DISTINCT xmin::text) FROM pginbox_receipts").Scan(&txns))
			is.True(txns < 550)
		})
	}
}

func TestGroupCommitLoneCall(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{GroupCommit: true, GroupCommitMaxWait: time.Millisecond})

	for range 3 { // flushers retire and come back
		res, err := c.Accept(ctx, orderMsg("evt-1", raw(`{}`)))
		is.NoErr(err)
		is.True(!res.ID.IsZero())
	}
	is.Equal(countRows(t, pool, "true"), 1)

	_, err := c.Accept(ctx, orderMsg("evt-1", raw(`{"changed":true}`)))
	is.True(errors.Is(err, inbox.ErrIdentityConflict))

	// A call whose context is already done is never queued: certainly not stored.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Accept(cctx, orderMsg("evt-2", raw(`{}`)))
	is.True(errors.Is(err, context.Canceled))
	is.True(!errors.Is(err, inbox.ErrCommitUncertain))
	is.Equal(countRows(t, pool, "true"), 1)
}

func TestGroupCommitLostReplyIsUncertainForTheWholeBatch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var armed atomic.Bool
	pool := losingPool(t, "INSERT INTO pginbox_receipts", &armed, pgx.QueryExecModeExec, 0)
	c := newClient(t, pool, inbox.Config{GroupCommit: true, GroupCommitFlushers: 1})

	var msgs []inbox.Message
	for i := range 50 {
		msgs = append(msgs, orderMsg(fmt.Sprintf("evt-%d", i), raw(`{}`)))
	}
	armed.Store(true)
	results := acceptConcurrently(c, msgs)
	is.True(!armed.Load())
	var uncertain []string
	for _, r := range results {
		switch {
		case errors.Is(r.err, inbox.ErrCommitUncertain):
			uncertain = append(uncertain, r.msg.MessageID)
			is.Equal(inbox.ActionFor(r.err), inbox.ActionRetry)
		case r.err != nil:
			t.Fatalf("%s: %v", r.msg.MessageID, r.err)
		default:
			is.Equal(r.res.Outcome, inbox.Accepted)
		}
	}
	is.True(len(uncertain) > 0)

	// The lost batch committed; every call in it, and only those, was told the
	// outcome is unknown. Redelivering everything reconciles it.
	waitForRows(t, pool, 50)
	var txns, inLostTxn int
	is.NoErr(pool.QueryRow(context.Background(), `
		SELECT count(DISTINCT xmin::text),
		       (SELECT count(*) FROM pginbox_receipts a WHERE a.xmin::text = min(r.xmin::text))
		FROM pginbox_receipts r WHERE message_id = ANY($1)`, uncertain).Scan(&txns, &inLostTxn))
	is.Equal(txns, 1)
	is.Equal(inLostTxn, len(uncertain))
	again := acceptConcurrently(c, msgs)
	for i, r := range again {
		is.NoErr(r.err)
		is.Equal(r.res.Outcome, inbox.Duplicate)
		if results[i].err == nil {
			is.Equal(r.res.ID, results[i].res.ID)
		}
	}
}

// A caller that gives up while its call waits in the queue certainly stored
// nothing; one that gives up after its batch was sent cannot know.
func TestGroupCommitCallerGivingUp(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{GroupCommit: true})

	// An open transaction holds identity evt-held, so the flush that carries
	// it waits on the row lock, and calls behind it wait in the queue.
	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	_, err = c.AcceptTx(ctx, tx, orderMsg("evt-held", raw(`{}`)))
	is.NoErr(err)

	ctxA, cancelA := context.WithCancel(ctx)
	errA := make(chan error, 1)
	go func() {
		_, err := c.Accept(ctxA, orderMsg("evt-held", raw(`{}`)))
		errA <- err
	}()
	testkit.Eventually(t, 10*time.Second, func() bool {
		var waiting int
		is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&waiting))
		return waiting > 0
	}, "the flush to block on the held identity")

	ctxB, cancelB := context.WithCancel(ctx)
	errB := make(chan error, 1)
	go func() {
		_, err := c.Accept(ctxB, orderMsg("evt-queued", raw(`{}`)))
		errB <- err
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return inbox.GroupCommitQueued(c) == 1 }, "B queued behind the blocked flush")
	cancelB()
	err = <-errB
	is.True(errors.Is(err, context.Canceled))
	is.True(!errors.Is(err, inbox.ErrCommitUncertain))

	cancelA()
	err = <-errA
	is.True(errors.Is(err, inbox.ErrCommitUncertain)) // its batch was already sent
	is.Equal(inbox.ActionFor(err), inbox.ActionRetry)

	// Release the identity: A's batch goes on and commits without its caller,
	// which is exactly why A was told the outcome is unknown.
	is.NoErr(tx.Rollback(ctx))
	waitForRows(t, pool, 1)
	res, err := c.Accept(ctx, orderMsg("evt-after", raw(`{}`)))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	is.Equal(countRows(t, pool, "message_id = 'evt-held'"), 1)
	is.Equal(countRows(t, pool, "message_id = 'evt-queued'"), 0)
}

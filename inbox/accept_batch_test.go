package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// A batch accept resolves every item, with the same outcomes on one server
// and on Citus.
func TestAcceptBatchResolvesEveryItem(t *testing.T) {
	t.Parallel()
	onEachLayout(t, acceptBatchResolvesEveryItem)
}

func acceptBatchResolvesEveryItem(t *testing.T, pool *pgxpool.Pool) {
	is := is.New(t)
	ctx := context.Background()
	c := newClient(t, pool, inbox.Config{})

	done, err := c.Accept(ctx, orderMsg("evt-done", raw(`{"n":1}`)))
	is.NoErr(err)
	// A worker completes it, as an application would.
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "orders.projection.v1", EventType: "order.created", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error { return nil }))
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"orders.projection.v1"}, Logger: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	kept, err := c.Accept(ctx, orderMsg("evt-kept", raw(`{"n":2}`)))
	is.NoErr(err)
	before := rowSnapshot(t, pool, kept.ID)

	noID := orderMsg("", raw(`{}`))
	items, err := c.AcceptBatch(ctx, []inbox.Message{
		0: orderMsg("evt-new-1", raw(`{"n":10}`)),
		1: orderMsg("evt-done", raw(`{ "n" : 1 }`)), // same content as stored
		2: orderMsg("evt-kept", raw(`{"n":3}`)),     // changed content
		3: orderMsg("evt-bad", raw(`{"n":`)),
		4: orderMsg("evt-new-2", raw(`{"n":20}`)),
		5: orderMsg("evt-new-1", raw(`{"n":10}`)), // repeat in the batch
		6: orderMsg("evt-new-2", raw(`{"n":21}`)), // repeat with other content
		7: noID,
		8: orderMsg("evt-kept", raw(`{"n":2}`)), // repeat of a conflicting item, same as stored
	})
	is.NoErr(err)
	is.Equal(len(items), 9)

	is.Equal(items[0].Outcome, inbox.Accepted)
	is.Equal(items[0].Status, inbox.StatusPending)
	is.NoErr(items[0].Err)
	is.Equal(items[0].Action(), inbox.ActionAck)

	is.Equal(items[1].Outcome, inbox.Duplicate)
	is.Equal(items[1].ID, done.ID)
	is.Equal(items[1].Status, inbox.StatusCompleted) // current status, not reset

	is.Equal(items[2].Outcome, inbox.Conflict)
	is.Equal(items[2].ID, kept.ID)
	var conflict *inbox.ConflictError
	is.True(errors.As(items[2].Err, &conflict))
	is.Equal(conflict.ReceiptID, kept.ID)
	is.Equal(conflict.Identity.MessageID, "evt-kept")
	is.Equal(inbox.ActionFor(items[2].Err), inbox.ActionReject)

	is.Equal(items[3].Outcome, inbox.Invalid)
	var invalid *inbox.ValidationError
	is.True(errors.As(items[3].Err, &invalid))
	is.Equal(invalid.Rule, inbox.RuleInvalidJSON)
	is.True(items[3].ID.IsZero())
	is.Equal(inbox.ActionFor(items[3].Err), inbox.ActionReject)

	is.Equal(items[4].Outcome, inbox.Accepted)
	is.True(items[4].ID != items[0].ID)

	is.Equal(items[5].Outcome, inbox.Duplicate) // of item 0, in the same batch
	is.Equal(items[5].ID, items[0].ID)
	is.Equal(items[5].Status, inbox.StatusPending)

	is.Equal(items[6].Outcome, inbox.Conflict) // with item 4, the first wins
	is.Equal(items[6].ID, items[4].ID)
	is.True(errors.Is(items[6].Err, inbox.ErrIdentityConflict))

	is.Equal(items[7].Outcome, inbox.Invalid)
	is.True(errors.As(items[7].Err, &invalid))
	is.Equal(invalid.Field, "message_id")

	is.Equal(items[8].Outcome, inbox.Duplicate)
	is.Equal(items[8].ID, kept.ID)

	is.Equal(countRows(t, pool, "true"), 4)
	is.Equal(rowSnapshot(t, pool, kept.ID), before) // a conflict changes nothing
	var payload string
	is.NoErr(pool.QueryRow(ctx, "SELECT payload::text FROM pginbox_receipts_live WHERE id = $1", items[4].ID).Scan(&payload))
	is.Equal(payload, `{"n":20}`) // the canonical text, as stored
}

func TestAcceptBatchStoresWhatAcceptStores(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{MaxAttempts: 3})

	m := orderMsg("evt-1", map[string]any{"orderId": "o-1", "big": 9007199254740993})
	m.Metadata = map[string]string{"traceparent": "00-abc-01"}
	items, err := c.AcceptBatch(ctx, []inbox.Message{m})
	is.NoErr(err)
	is.Equal(items[0].Outcome, inbox.Accepted)

	// Accept sees the batch's receipt as its own: same fingerprint framing.
	res, err := c.Accept(ctx, m)
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)
	is.Equal(res.ID, items[0].ID)

	var payload, md string
	var maxAttempts int
	is.NoErr(pool.QueryRow(ctx, "SELECT payload::text, metadata::text, max_attempts FROM pginbox_receipts_live WHERE id = $1", items[0].ID).Scan(&payload, &md, &maxAttempts))
	is.Equal(payload, `{"big":9007199254740993,"orderId":"o-1"}`)
	is.Equal(md, `{"traceparent": "00-abc-01"}`)
	is.Equal(maxAttempts, 3)
}

func TestAcceptBatchWithNothingToStore(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	items, err := c.AcceptBatch(ctx, nil)
	is.NoErr(err)
	is.Equal(len(items), 0)

	items, err = c.AcceptBatch(ctx, []inbox.Message{orderMsg("evt-1", raw(`{"n":1e999999}`))})
	is.NoErr(err)
	is.Equal(items[0].Outcome, inbox.Invalid)
	is.True(errors.Is(items[0].Err, inbox.ErrInvalid))
	is.Equal(countRows(t, pool, "true"), 0)
}

func TestAcceptBatchNotifiesOncePerConsumer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, dsn := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	listener, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer listener.Close(ctx)
	_, err = listener.Exec(ctx, "LISTEN "+inbox.NotifyChannel)
	is.NoErr(err)

	var msgs []inbox.Message
	for i := range 5 {
		msgs = append(msgs, orderMsg(fmt.Sprintf("a-%d", i), raw(`{}`)))
		m := orderMsg(fmt.Sprintf("b-%d", i), raw(`{}`))
		m.Consumer = "billing.v1"
		msgs = append(msgs, m)
	}
	_, err = c.AcceptBatch(ctx, msgs)
	is.NoErr(err)
	// A batch of duplicates inserts nothing and wakes nobody.
	_, err = c.AcceptBatch(ctx, msgs[:4])
	is.NoErr(err)

	got := map[string]int{}
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break // quiet: nothing more was sent
		}
		got[n.Payload]++
	}
	is.Equal(got, map[string]int{"orders.projection.v1": 1, "billing.v1": 1})
}

func TestAcceptBatchTxCommitsWithTheCaller(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	msgs := []inbox.Message{orderMsg("evt-1", raw(`{}`)), orderMsg("evt-2", raw(`{}`))}

	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	items, err := c.AcceptBatchTx(ctx, tx, msgs)
	is.NoErr(err)
	is.Equal(items[0].Outcome, inbox.Accepted)
	again, err := c.AcceptBatchTx(ctx, tx, msgs) // sees its own transaction's rows
	is.NoErr(err)
	is.Equal(again[1].Outcome, inbox.Duplicate)
	is.Equal(again[1].ID, items[1].ID)
	is.NoErr(tx.Rollback(ctx))
	is.Equal(countRows(t, pool, "true"), 0)

	tx, err = pool.Begin(ctx)
	is.NoErr(err)
	items, err = c.AcceptBatchTx(ctx, tx, msgs)
	is.NoErr(err)
	is.NoErr(tx.Commit(ctx))
	is.Equal(items[0].Outcome, inbox.Accepted)
	is.Equal(countRows(t, pool, "true"), 2)

	// A server error inside the caller's transaction is a plain storage error:
	// the caller owns the commit, so it is never "uncertain".
	tx, err = pool.Begin(ctx)
	is.NoErr(err)
	_, err = tx.Exec(ctx, "SET LOCAL statement_timeout = 1; SELECT pg_sleep(0.05)")
	is.True(err != nil)
	_, err = c.AcceptBatchTx(ctx, tx, msgs)
	is.True(err != nil)
	is.True(!errors.Is(err, inbox.ErrCommitUncertain))
	is.Equal(inbox.ActionFor(err), inbox.ActionRetry)
	is.NoErr(tx.Rollback(ctx))
}

// Batches that overlap, each listing the identities in another order, must not
// deadlock, and each identity ends up with exactly one receipt, on one
// server and on Citus.
func TestConcurrentOverlappingBatchesConverge(t *testing.T) {
	t.Parallel()
	onEachLayout(t, concurrentOverlappingBatchesConverge)
}

func concurrentOverlappingBatchesConverge(t *testing.T, pool *pgxpool.Pool) {
	is := is.New(t)
	ctx := context.Background()
	c := newClient(t, pool, inbox.Config{})

	const ids, batches = 200, 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		errs     []error
		accepted = map[string]inbox.ID{}
		seen     = map[string]map[inbox.ID]bool{}
	)
	for b := range batches {
		msgs := make([]inbox.Message, ids)
		for i, j := range rand.Perm(ids) {
			msgs[i] = orderMsg(fmt.Sprintf("evt-%d", j), map[string]int{"n": j})
		}
		if b%2 == 1 {
			msgs = msgs[:ids/2]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			items, err := c.AcceptBatch(ctx, msgs)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for i, it := range items {
				id := msgs[i].MessageID
				if it.Outcome == inbox.Accepted {
					if _, twice := accepted[id]; twice {
						errs = append(errs, fmt.Errorf("%s accepted twice", id))
					}
					accepted[id] = it.ID
				} else if it.Outcome != inbox.Duplicate {
					errs = append(errs, fmt.Errorf("%s: %s %v", id, it.Outcome, it.Err))
				}
				if seen[id] == nil {
					seen[id] = map[inbox.ID]bool{}
				}
				seen[id][it.ID] = true
			}
		}()
	}
	wg.Wait()
	is.Equal(errs, nil)
	is.Equal(len(accepted), ids)
	for id, receipts := range seen {
		is.Equal(len(receipts), 1) // everyone saw the one receipt of id
		is.True(receipts[accepted[id]])
	}
	is.Equal(countRows(t, pool, "true"), ids)
}

func TestAcceptBatchInEveryExecMode(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]pgx.QueryExecMode{
		"cache statement": pgx.QueryExecModeCacheStatement,
		"exec":            pgx.QueryExecModeExec,
		"simple protocol": pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			pool, _ := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.DefaultQueryExecMode = mode })
			c := newClient(t, pool, inbox.Config{})

			m := orderMsg("evt-1", raw(`{"s":"it's \"quoted\" \\ {x,y}","n":9007199254740993}`))
			m.Metadata = map[string]string{"k": `v'"}`}
			items, err := c.AcceptBatch(ctx, []inbox.Message{m, orderMsg("evt-2", raw(`[]`))})
			is.NoErr(err)
			is.Equal(items[0].Outcome, inbox.Accepted)
			is.Equal(items[1].Outcome, inbox.Accepted)
			again, err := c.AcceptBatch(ctx, []inbox.Message{m})
			is.NoErr(err)
			is.Equal(again[0].Outcome, inbox.Duplicate)
			is.Equal(again[0].ID, items[0].ID)

			var payload, md string
			is.NoErr(pool.QueryRow(ctx, "SELECT payload->>'s', metadata->>'k' FROM pginbox_receipts_live WHERE id = $1", items[0].ID).Scan(&payload, &md))
			is.Equal(payload, `it's "quoted" \ {x,y}`)
			is.Equal(md, `v'"}`)
		})
	}
}

func TestAcceptBatchLostReplyIsUncertainThenReconciles(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	var armed atomic.Bool
	pool := losingPool(t, "INSERT INTO pginbox_receipts", &armed, pgx.QueryExecModeExec, 0)
	c := newClient(t, pool, inbox.Config{})
	msgs := []inbox.Message{orderMsg("evt-1", raw(`{}`)), orderMsg("evt-2", raw(`{}`))}

	armed.Store(true)
	items, err := c.AcceptBatch(ctx, msgs)
	is.True(errors.Is(err, inbox.ErrCommitUncertain))
	is.Equal(inbox.ActionFor(err), inbox.ActionRetry)
	is.Equal(items, nil)
	is.True(!armed.Load())

	waitForRows(t, pool, 2) // it committed although the reply was lost
	items, err = c.AcceptBatch(ctx, msgs)
	is.NoErr(err)
	is.Equal(items[0].Outcome, inbox.Duplicate)
	is.Equal(items[1].Outcome, inbox.Duplicate)
}

func waitForRows(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool { return countRows(t, pool, "true") == n }, "%d receipts", n)
}

package inbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// roundTrips records what each round trip to the server carried: one
// statement, or every statement of a pipelined batch.
type roundTrips struct {
	mu    sync.Mutex
	trips [][]string
}

func firstLine(sql string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(sql), "\n")
	return first
}

func (r *roundTrips) add(trip []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = append(r.trips, trip)
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add([]string{firstLine(d.SQL)})
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var trip []string
	for _, q := range d.Batch.QueuedQueries {
		trip = append(trip, firstLine(q.SQL))
	}
	r.add(trip)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// with returns the round trips that carried a statement starting with prefix.
func (r *roundTrips) with(prefix string) [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]string
	for _, trip := range r.trips {
		for _, s := range trip {
			if strings.HasPrefix(s, prefix) {
				out = append(out, trip)
				break
			}
		}
	}
	return out
}

// tracedBacklog returns a pool whose round trips are recorded, on a
// database holding n accepted receipts.
func tracedBacklog(t *testing.T, n int) (*roundTrips, *pgxpool.Pool) {
	t.Helper()
	trips := &roundTrips{}
	pool, _ := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = trips })
	var msgs []inbox.Message
	for i := range n {
		msgs = append(msgs, orderMsg(fmt.Sprint("evt-", i), raw(`{"orderId":"o-1"}`)))
	}
	acceptAll(t, newClient(t, pool, inbox.Config{}), msgs...)
	return trips, pool
}

// A handler transaction costs two round trips: BEGIN, its timeouts, the
// scope and ReceiptStart in the first, COMMIT in the second. BEGIN alone used
// to be a round trip of its own.
func TestHandlerTransactionOpensWithItsFirstStatement(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	trips, pool := tracedBacklog(t, 3)

	var mu sync.Mutex
	var timeouts []string
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		var st, idle string
		if err := m.Tx.QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&st, &idle); err != nil {
			return err
		}
		mu.Lock()
		timeouts = append(timeouts, st+" "+idle)
		mu.Unlock()
		return nil
	}), inbox.WorkerConfig{Concurrency: 1, MessagesPerTx: 3, HandlerTimeout: 4 * time.Second, PollInterval: 50 * time.Millisecond})
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 20*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == 3 }, "every receipt COMPLETED")
	is.NoErr(w.Stop(ctx))

	starts := trips.with("-- name: ReceiptStart")
	is.True(len(starts) >= 1)
	for _, trip := range starts {
		is.Equal(trip[0], "BEGIN")
		is.True(strings.HasPrefix(trip[1], "SELECT set_config('statement_timeout'"))
	}
	is.Equal(len(trips.with("BEGIN; SET LOCAL statement_timeout")), 0) // no BEGIN of its own
	commits := 0                                                       // on their own: a claim's COMMIT rides in its pipeline
	for _, trip := range trips.with("COMMIT") {
		if len(trip) == 1 {
			commits++
		}
	}
	is.Equal(commits, len(starts))
	// HandlerTimeout plus one second, in both settings, for every handler.
	is.Equal(timeouts, []string{"5s 5s", "5s 5s", "5s 5s"})
}

// With one message per transaction (the default) every statement of a
// handler transaction is paid per message, so its opening is one statement:
// BEGIN, the timeouts, scope, plan settings and process ID in one SELECT,
// ReceiptStart and the plan settings restored, then COMMIT. It used to be
// seven statements before the handler ran.
func TestHandlerTransactionOpensInOneStatement(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	trips, pool := tracedBacklog(t, 3)
	w := newWorker(t, pool, registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{Concurrency: 1, PollInterval: 50 * time.Millisecond})
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 20*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == 3 }, "every receipt COMPLETED")
	is.NoErr(w.Stop(ctx))

	starts := trips.with("-- name: ReceiptStart")
	is.Equal(len(starts), 3) // one transaction per message
	for _, trip := range starts {
		var sent []string
		for _, s := range trip {
			if s != "DISCARD PLANS" { // now and then, to renew the session's plans
				sent = append(sent, s)
			}
		}
		is.Equal(len(sent), 4) // BEGIN, the opening, ReceiptStart, the plan settings restored
		is.Equal(sent[0], "BEGIN")
		is.True(strings.HasPrefix(sent[1], "SELECT set_config('statement_timeout'"))
		is.True(strings.Contains(sent[1], "pginbox.tenant"))
		is.True(strings.Contains(sent[1], "pg_backend_pid()"))
		is.True(strings.HasPrefix(sent[2], "-- name: ReceiptStart"))
	}
}

// The statement that opens a handler transaction (ReceiptStart) and the
// claim run on generic plans: left to choose, the server planned them afresh
// at every call, and planning cost more than running them. The handler's own statements run
// with the session's plan_cache_mode again.
func TestHandlerStartRunsOnAGenericPlan(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
		c.ConnConfig.RuntimeParams["enable_mergejoin"] = "off"
	})
	var msgs []inbox.Message
	for i := range 8 {
		msgs = append(msgs, orderMsg(fmt.Sprint("evt-", i), raw(`{"orderId":"o-1"}`)))
	}
	acceptAll(t, newClient(t, pool, inbox.Config{}), msgs...)

	var mu sync.Mutex
	var seen []string
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		var mode string
		var generic, custom int64
		// The settings the statement was planned with are the caller's again.
		err := m.Tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode') || ' seqscan ' || current_setting('enable_seqscan')
				|| ' hashjoin ' || current_setting('enable_hashjoin') || ' mergejoin ' || current_setting('enable_mergejoin'),
				generic_plans, custom_plans
			FROM pg_prepared_statements
			WHERE statement LIKE '%-- name: ' || 'ReceiptStart %' -- not this statement itself`).Scan(&mode, &generic, &custom)
		if err != nil {
			return err
		}
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s generic>0:%v custom:%d", mode, generic > 0, custom))
		mu.Unlock()
		return nil
	}), inbox.WorkerConfig{Concurrency: 1, PollInterval: 50 * time.Millisecond})
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 20*time.Second, func() bool { return countRows(t, pool, "status = 'COMPLETED'") == 8 }, "every receipt COMPLETED")
	// The claims ran on generic plans too (pipetx.Async with GenericPlan).
	// Read while the worker runs: Stop may cancel a claim in flight, which
	// closes its connection and the session's record with it.
	var custom int64
	testkit.Eventually(t, 20*time.Second, func() bool {
		var generic int64
		for _, conn := range pool.AcquireAllIdle(ctx) {
			var g, c int64
			err := conn.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
				FROM pg_prepared_statements WHERE statement LIKE '%-- name: ' || 'ReceiptClaim %'`).Scan(&g, &c)
			conn.Release()
			is.NoErr(err)
			generic, custom = generic+g, custom+c
		}
		return generic > 0
	}, "a claim's generic plan on an idle connection")
	is.Equal(custom, int64(0))
	is.NoErr(w.Stop(ctx))
	is.Equal(len(seen), 8)
	for _, s := range seen {
		is.Equal(s, "force_custom_plan seqscan on hashjoin on mergejoin off generic>0:true custom:0")
	}
}

// The handler's transaction does what pgx's does: savepoints (Begin),
// large objects, batches, ErrTxClosed-free use until the worker ends it.
func TestHandlerTransactionSavepointsAndLargeObjects(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupEffects(t, pool)
	acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))

	var read string
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		// A savepoint rolled back leaves nothing; a nested one released keeps its write.
		sp, err := m.Tx.Begin(ctx)
		if err != nil {
			return err
		}
		rolled := *m
		rolled.Tx, rolled.MessageID = sp, "rolled-back"
		if err := writeEffect(ctx, &rolled, "x"); err != nil {
			return err
		}
		if err := sp.Rollback(ctx); err != nil {
			return err
		}
		if _, err := sp.Exec(ctx, "SELECT 1"); err == nil {
			return fmt.Errorf("a rolled-back savepoint ran a statement")
		}
		outer, err := m.Tx.Begin(ctx)
		if err != nil {
			return err
		}
		inner, err := outer.Begin(ctx)
		if err != nil {
			return err
		}
		kept := *m
		kept.Tx = inner
		if err := writeEffect(ctx, &kept, "kept"); err != nil {
			return err
		}
		if err := inner.Commit(ctx); err != nil {
			return err
		}
		if err := outer.Commit(ctx); err != nil {
			return err
		}

		lo := m.Tx.LargeObjects()
		oid, err := lo.Create(ctx, 0)
		if err != nil {
			return err
		}
		obj, err := lo.Open(ctx, oid, pgx.LargeObjectModeWrite|pgx.LargeObjectModeRead)
		if err != nil {
			return err
		}
		if _, err := obj.Write([]byte("large")); err != nil {
			return err
		}
		if _, err := obj.Seek(0, 0); err != nil {
			return err
		}
		buf := make([]byte, 5)
		if _, err := obj.Read(buf); err != nil {
			return err
		}
		read = string(buf)
		br := m.Tx.SendBatch(ctx, &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{{SQL: "SELECT 1"}}})
		return br.Close()
	}), inbox.WorkerConfig{})
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	is.Equal(read, "large")
	is.Equal(effectCount(t, pool, "true"), 1)
	is.Equal(effectCount(t, pool, "message_id = 'evt-1'"), 1)
}

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

// A tenant's burst cannot starve the others: a claim serves the scopes with
// due work in turns, so a cold tenant's message accepted behind a hot
// tenant's backlog runs long before that backlog drains.
func TestClaimsServeScopesInTurns(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	// The connections are open before the worker starts: otherwise the slot
	// that takes the cold message may still be connecting while the other
	// runs 20-30 hot handlers on a connection the claims warmed (seen under
	// -race on a loaded machine), which counts connection setup, not turns.
	pool, _ := newPool(t, func(c *pgxpool.Config) { c.MinConns = 8 })
	testkit.Eventually(t, 30*time.Second, func() bool { return pool.Stat().TotalConns() >= 8 }, "the pool's 8 connections open")
	c := newClient(t, pool, inbox.Config{})

	const hot = 1000
	msgs := make([]inbox.Message, hot)
	for i := range msgs {
		msgs[i] = orderMsg(fmt.Sprintf("hot-%04d", i), map[string]int{"n": i})
		msgs[i].Scope = inbox.Tenant("hot")
	}
	for len(msgs) > 0 {
		_, err := c.AcceptBatch(ctx, msgs[:100])
		is.NoErr(err)
		msgs = msgs[100:]
	}
	cold := orderMsg("cold-1", map[string]int{"n": 1})
	cold.Scope = inbox.Tenant("cold")
	_, err := c.Accept(ctx, cold)
	is.NoErr(err)

	var mu sync.Mutex
	var order []string // tenant of each handler run, in order
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		mu.Lock()
		order = append(order, m.Scope.ID)
		mu.Unlock()
		time.Sleep(time.Millisecond) // the handler's work: claims run while handlers do
		return nil
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 2, ClaimBatch: 20})
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range order {
			if s == "cold" {
				return true
			}
		}
		return false
	}, "the cold tenant's message handled")
	is.NoErr(w.Stop(ctx))

	mu.Lock()
	defer mu.Unlock()
	before := 0
	for _, s := range order {
		if s == "cold" {
			break
		}
		before++
	}
	// The first claim already serves both scopes: at most one claim's worth
	// of hot messages run first.
	if before > 20 {
		t.Fatalf("%d of the hot tenant's %d messages ran before the cold tenant's one message, want at most one claim (20)", before, hot)
	}
}

// A tenant's message accepted while the worker is busy with another tenant's
// backlog is claimed at the next free place in the queue, not when the
// queued backlog has drained to half: its notification starts a claim, the
// claim serves the cold scope first (its turn comes after the hot scope's),
// and the ready queue alternates scopes. Counted in hot handler runs, not
// time: with ClaimBatch 50, waiting for a half-empty queue lets about 22 run.
func TestNotifiedClaimSkipsTheQueuedBacklog(t *testing.T) {
	t.Parallel()
	if n := hotRunsBeforeCold(t, false); n > 10 {
		t.Fatalf("%d hot handlers ran between the cold message's accept and its handler, want at most 10: the claim waited for the queue to drain to half", n)
	}
}

// A message accepted before the worker's LISTEN session subscribed sent its
// notification to nobody: the subscription counts as one, so the message
// is claimed at the next free place, not when the queue has drained to half.
func TestClaimAfterSubscribingTakesWhatWasNotifiedBefore(t *testing.T) {
	t.Parallel()
	if n := hotRunsBeforeCold(t, true); n > 10 {
		t.Fatalf("%d hot handlers ran between the cold message's accept (before the worker listened) and its handler, want at most 10: the missed notification waited for the queue to drain to half", n)
	}
}

// hotRunsBeforeCold starts a worker (Concurrency 1, ClaimBatch 50) on a hot
// tenant's 300-message backlog, accepts a cold tenant's message once three
// hot handlers have run, and returns how many more hot handlers ran before
// the cold one. With holdListen, the worker's LISTEN session subscribes only
// after that accept.
func hotRunsBeforeCold(t *testing.T, holdListen bool) int {
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	const hot = 300
	msgs := make([]inbox.Message, hot)
	for i := range msgs {
		msgs[i] = orderMsg(fmt.Sprintf("hot-%04d", i), map[string]int{"n": i})
		msgs[i].Scope = inbox.Tenant("hot")
	}
	_, err := c.AcceptBatch(ctx, msgs)
	is.NoErr(err)

	var mu sync.Mutex
	hotRuns, coldAt := 0, -1 // hot runs so far; hot runs when the cold message ran
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		mu.Lock()
		if m.Scope.ID == "hot" {
			hotRuns++
		} else {
			coldAt = hotRuns
		}
		mu.Unlock()
		// The handler's work, long beside a claim: what is counted is the
		// handler runs a claim takes to reach the cold message.
		time.Sleep(50 * time.Millisecond)
		return nil
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 1, ClaimBatch: 50, PollInterval: time.Minute})
	// The first subscription waits for release; a failing test releases it
	// before stopping the worker, which waits for its listener.
	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	if holdListen {
		var once sync.Once
		inbox.SetBeforeListenHook(w, func() { once.Do(func() { <-release }) })
	} else {
		unblock()
	}
	is.NoErr(w.Start(ctx))
	defer w.Stop(ctx)
	defer unblock()
	// The queue is full (a claim of 50 against one running handler) once
	// the first hot handlers have run.
	testkit.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return hotRuns >= 3
	}, "the hot backlog draining")
	if !holdListen {
		waitListening(t, pool)
	}
	mu.Lock()
	acceptedAt := hotRuns
	mu.Unlock()
	cold := orderMsg("cold-1", map[string]int{"n": 1})
	cold.Scope = inbox.Tenant("cold")
	_, err = c.Accept(ctx, cold)
	is.NoErr(err)
	unblock()
	testkit.Eventually(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return coldAt >= 0
	}, "the cold tenant's message handled")
	mu.Lock()
	defer mu.Unlock()
	t.Logf("the cold message ran after %d more hot handler runs", coldAt-acceptedAt)
	return coldAt - acceptedAt
}

// waitListening waits until a session of the test's database subscribed to
// the receipts' notifications.
func waitListening(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			  AND query LIKE '%LISTEN ' || $1 || '%'`, inbox.NotifyChannel).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}, "the worker's LISTEN session")
}

// A claim serves fewer scopes rather than give each a share smaller than a
// handler transaction: with 16 tenants, ClaimBatch 40 and MessagesPerTx 10,
// a claim serves 4 tenants with 10 each (not 16 with 3 each), and the
// transactions carry full batches.
func TestClaimSharesFillHandlerTransactions(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	const tenants, each = 16, 20
	var msgs []inbox.Message
	for i := range each {
		for tn := range tenants {
			m := orderMsg(fmt.Sprintf("t%02d-%02d", tn, i), map[string]int{"n": i})
			m.Scope = inbox.Tenant(fmt.Sprintf("tenant-%02d", tn))
			msgs = append(msgs, m)
		}
	}
	_, err := c.AcceptBatch(ctx, msgs)
	is.NoErr(err)

	w := newWorker(t, pool, registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{Concurrency: 4, MessagesPerTx: 10, ClaimBatch: 40, PollInterval: 50 * time.Millisecond})
	is.NoErr(w.Start(ctx))
	testkit.Eventually(t, 60*time.Second, func() bool {
		return countRows(t, pool, "status = 'COMPLETED'") == tenants*each
	}, "every receipt COMPLETED")
	is.NoErr(w.Stop(ctx))

	// A handler transaction's completions share completed_at (now(), the
	// transaction's start): one value per transaction and scope.
	var txs int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(DISTINCT (completed_at, scope_id)) FROM pginbox_receipts_live").Scan(&txs))
	per := float64(tenants*each) / float64(txs)
	t.Logf("%d messages in %d handler transactions (%.1f each)", tenants*each, txs, per)
	if per < 7 {
		t.Fatalf("%.1f messages per handler transaction, want close to MessagesPerTx (10): shares of a claim too small to fill one", per)
	}
}

// claimTrace counts the claim statements and those that claimed nothing,
// and the claims that started after the worker's LISTEN returned.
type claimTrace struct {
	mu           sync.Mutex
	claims, none int
	listened     bool
	afterListen  int
}

type claimTraceKey struct{}

func (c *claimTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, claimTraceKey{}, strings.HasPrefix(d.SQL, "-- name: ReceiptListen :exec"))
}
func (c *claimTrace) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if listen, _ := ctx.Value(claimTraceKey{}).(bool); listen && d.Err == nil {
		c.mu.Lock()
		c.listened = true
		c.mu.Unlock()
	}
}
func (c *claimTrace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return context.WithValue(ctx, claimTraceKey{}, c.listened)
}
func (c *claimTrace) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if !strings.HasPrefix(d.SQL, "-- name: ReceiptClaim :many") || d.Err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims++
	if d.CommandTag.RowsAffected() == 0 {
		c.none++
	}
	if after, _ := ctx.Value(claimTraceKey{}).(bool); after {
		c.afterListen++
	}
}

// waitClaims waits until n more claim statements have completed than had
// when it was called: a barrier for what a worker's polls did not do.
func (c *claimTrace) waitClaims(t testing.TB, n int) {
	t.Helper()
	from, _ := c.counts()
	testkit.Eventually(t, 10*time.Second, func() bool { claims, _ := c.counts(); return claims >= from+n }, "%d more claims", n)
}

// counts returns the claims so far and those that started after LISTEN.
func (c *claimTrace) counts() (claims, afterListen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claims, c.afterListen
}

func (c *claimTrace) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// A turn goes round in one statement: a claim after the last scope serves
// the first scopes, instead of coming back empty and claiming again from
// the start (one wasted statement per turn).
func TestClaimTurnWrapsInOneStatement(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	trace := &claimTrace{}
	pool, _ := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = trace })
	c := newClient(t, pool, inbox.Config{})
	var msgs []inbox.Message
	for i := range 4 {
		for _, tn := range []string{"a", "b", "c"} {
			m := orderMsg(fmt.Sprintf("%s-%d", tn, i), map[string]int{"n": i})
			m.Scope = inbox.Tenant(tn)
			msgs = append(msgs, m)
		}
	}
	_, err := c.AcceptBatch(ctx, msgs)
	is.NoErr(err)

	// Drain claims Concurrency (2) at a time: a and b, then c, then a and b
	// again, ..., and stops at the first claim that finds nothing.
	w := newWorker(t, pool, registry(t, func(context.Context, *handler.Msg) error { return nil }), inbox.WorkerConfig{Concurrency: 2})
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 12)
	trace.mu.Lock()
	defer trace.mu.Unlock()
	t.Logf("%d claim statements, %d of them claimed nothing", trace.claims, trace.none)
	is.Equal(trace.none, 1) // the last one: nothing was due
}

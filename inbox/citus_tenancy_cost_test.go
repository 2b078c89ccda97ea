package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// statementCounter is a pgx tracer that counts the statements a pool sends
// and the round trips they take (a query, or a pipelined batch).
type statementCounter struct {
	mu                     sync.Mutex
	statements, roundTrips int
}

func (c *statementCounter) add(statements int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statements += statements
	c.roundTrips++
}

func (c *statementCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statements, c.roundTrips = 0, 0
}

func (c *statementCounter) counts() (statements, roundTrips int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statements, c.roundTrips
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	c.add(d.Batch.Len())
	return ctx
}

func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// workerCommands collects the commands Citus sends to the worker nodes
// (citus.log_remote_commands notices).
type workerCommands struct {
	mu    sync.Mutex
	lines []string
}

func (w *workerCommands) add(_ *pgconn.PgConn, n *pgconn.Notice) {
	if strings.HasPrefix(n.Message, "issuing ") {
		w.mu.Lock()
		w.lines = append(w.lines, n.Message)
		w.mu.Unlock()
	}
}

func (w *workerCommands) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = nil
}

func (w *workerCommands) count(subs string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if strings.Contains(l, subs) {
			n++
		}
	}
	return n
}

// acceptCost is what one Accept sends, averaged over n accepts of new
// messages, each with its wake-up, once the pool's one connection is warm (its statements prepared,
// tenancy learned).
type acceptCost struct {
	Statements, RoundTrips int // client to the server (the coordinator on Citus)
	WorkerCommands         int // coordinator to the worker nodes (Citus only)
}

func measureAccepts(t *testing.T, pool *pgxpool.Pool, counter *statementCounter, rc *workerCommands, s inbox.Scope, prefix string) acceptCost {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	c := newClient(t, pool, inbox.Config{})
	for i := range 3 {
		_, err := c.Accept(ctx, tenantMsg(s, fmt.Sprint(prefix, "warm-", i)))
		is.NoErr(err)
	}
	const n = 10
	// Past the coalescing window (25ms), which a Client keeps by the clock:
	// the warm-ups' owed wake-up goes out before the count starts.
	time.Sleep(100 * time.Millisecond)
	counter.reset()
	if rc != nil {
		rc.reset()
	}
	for i := range n {
		// Past the window in which a Client coalesces wake-ups (25ms), kept
		// by the clock: every accept sends its own, in its round trip.
		time.Sleep(30 * time.Millisecond)
		res, err := c.Accept(ctx, tenantMsg(s, fmt.Sprint(prefix, "cost-", i)))
		is.NoErr(err)
		is.Equal(res.Outcome, inbox.Accepted)
	}
	statements, roundTrips := counter.counts()
	is.Equal(fmt.Sprint(statements%n, roundTrips%n), "0 0")
	cost := acceptCost{Statements: statements / n, RoundTrips: roundTrips / n}
	if rc != nil {
		sent := rc.count("")
		is.Equal(sent%n, 0)
		cost.WorkerCommands = sent / n
	}
	return cost
}

// countedPool connects to cfg's database as cfg's role through one
// connection, counting statements, with Citus logging what it sends to the
// workers into rc.
func countedPool(t *testing.T, cfg *pgxpool.Config, rc *workerCommands) (*pgxpool.Pool, *statementCounter) {
	t.Helper()
	cfg = cfg.Copy()
	counter := &statementCounter{}
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 1
	if rc != nil {
		cfg.ConnConfig.RuntimeParams["citus.log_remote_commands"] = "on"
		cfg.ConnConfig.OnNotice = rc.add
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, counter
}

// What tenancy costs an Accept, counted (docs/SCALE-OUT.md quotes these
// numbers). On one server with row-level security: ScopeApply and
// ReceiptAccept, one round trip, as before Citus support. On Citus a role
// that row-level security does not restrict sends ReceiptAcceptRouted alone,
// which Citus hands whole to the tenant's node (one command there), then the
// wake-up in a round trip of its own. The restricted application role sends
// the call in a transaction with the scope (BEGIN, ScopePropagate and two SET
// LOCAL, the call, COMMIT: one round trip), where Citus routes the
// function's two inserts and sends the two SET LOCAL to the tenant's node in
// the command that begins the transaction there; then the wake-up.
func TestCitusTenancyAcceptCost(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	td := newTenancyDB(t)
	single, counter := countedPool(t, td.app.Config(), nil)
	singleCost := measureAccepts(t, single, counter, nil, inbox.Tenant("a"), "")
	is.Equal(singleCost, acceptCost{Statements: 2, RoundTrips: 1})

	d := newCitusTenancy(t)
	sysRC, appRC := &workerCommands{}, &workerCommands{}
	sys, sysCounter := countedPool(t, d.sys.Config(), sysRC)
	app, appCounter := countedPool(t, d.app.Config(), appRC)
	unrestricted := measureAccepts(t, sys, sysCounter, sysRC, inbox.Tenant("tenant-a"), "sys-")
	scoped := measureAccepts(t, app, appCounter, appRC, inbox.Tenant("tenant-a"), "app-")
	t.Logf("one Accept: one server, row-level security: %+v; Citus, BYPASSRLS role: %+v; Citus, restricted role: %+v",
		singleCost, unrestricted, scoped)
	is.Equal(unrestricted, acceptCost{Statements: 2, RoundTrips: 2, WorkerCommands: 1})
	is.Equal(sysRC.count("FROM public.pginbox_accept("), 10) // the whole call, on the scope's node
	is.Equal(scoped, acceptCost{Statements: 7, RoundTrips: 2, WorkerCommands: 4})
	is.Equal(appRC.count("BEGIN TRANSACTION ISOLATION LEVEL READ COMMITTED;SET LOCAL pginbox.tenant = E'tenant-a';SET LOCAL pginbox.global = E'';"), 10)
}

// The worker's handler transactions on Citus (batched, with savepoints after
// a failure) and its failure records carry the scope to the tenant's worker
// in the command that begins the transaction there: every transaction the
// application role's pool opens on a worker starts with the scope, and no
// SET travels as a command of its own.
func TestCitusTenancyHandlerScopeTravelsWithBegin(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	d := newCitusTenancy(t)
	rc := &workerCommands{}
	cfg := d.app.Config()
	cfg.ConnConfig.RuntimeParams["citus.log_remote_commands"] = "on"
	cfg.ConnConfig.OnNotice = rc.add
	app, err := pgxpool.NewWithConfig(ctx, cfg)
	is.NoErr(err)
	t.Cleanup(app.Close)
	ids := acceptAll(t, newClient(t, app, inbox.Config{}), tenantMsg(inbox.Tenant("tenant-a"), "fails"),
		tenantMsg(inbox.Tenant("tenant-a"), "ok"), tenantMsg(inbox.Global(), "global"))
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		if m.MessageID == "fails" {
			return handler.Permanent(errors.New("no"))
		}
		return nil
	})
	rc.reset()
	w := newWorker(t, app, reg, inbox.WorkerConfig{SystemPool: d.sys, MessagesPerTx: 10})
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 7) // with citusRestricted's four
	is.Equal(stateOf(t, d.sys, ids[0]).Status, "DEAD")
	is.Equal(stateOf(t, d.sys, ids[2]).Status, "COMPLETED")

	rc.mu.Lock()
	lines := append([]string(nil), rc.lines...)
	rc.mu.Unlock()
	begins := 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "issuing BEGIN"):
			begins++
			if !strings.Contains(l, ";SET LOCAL pginbox.tenant = E'") || !strings.Contains(l, ";SET LOCAL pginbox.global = E'") {
				t.Errorf("a transaction began on a worker without the scope: %s", l)
			}
		case strings.HasPrefix(l, "issuing SET"):
			t.Errorf("a SET sent on its own: %s", l)
		}
	}
	is.True(begins >= 3)                                // a transaction per scope at least (tenant-a, tenant-b, global)
	is.True(rc.count("UPDATE public.pginbox_work") > 0) // the failure record's, among the log
	is.True(rc.count("E'on'") > 0)                      // the global scope's transaction
}

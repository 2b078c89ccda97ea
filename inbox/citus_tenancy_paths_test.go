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
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/schema"
)

// citusTenancyDB is citusRestricted's database (row-level security on,
// receipts m0 and m1 of tenant-a and tenant-b) with pools as the application
// role (app) and as a BYPASSRLS system role (sys), and tenant_orders: an
// application table distributed by its tenant, colocated with pginbox's, under
// the policy the docs prescribe (the tenant pginbox sets).
type citusTenancyDB struct {
	owner, app, sys *pgxpool.Pool
}

func newCitusTenancy(t *testing.T) *citusTenancyDB {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	owner, appCfg := citusRestricted(t)
	sysRole := "sys_" + strings.ToLower(inboxtype.New().String())
	_, err := owner.Exec(ctx, "CREATE ROLE "+sysRole+" LOGIN")
	is.NoErr(err)
	stmts, err := schema.GrantStatements(sysRole, true)
	is.NoErr(err)
	for _, s := range stmts {
		_, err := owner.Exec(ctx, s)
		is.NoErr(err)
	}
	for _, s := range []string{
		"CREATE TABLE tenant_orders (tenant_id text NOT NULL, order_id text NOT NULL, PRIMARY KEY (tenant_id, order_id))",
		"SELECT create_distributed_table('tenant_orders', 'tenant_id', colocate_with => 'pginbox_receipts')",
		"ALTER TABLE tenant_orders ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY",
		`CREATE POLICY tenant_orders_scope ON tenant_orders
		    USING (tenant_id = current_setting('pginbox.tenant', true))
		    WITH CHECK (tenant_id = current_setting('pginbox.tenant', true))`,
	} {
		_, err := owner.Exec(ctx, s)
		is.NoErr(err)
	}
	_, err = owner.Exec(ctx, "GRANT SELECT, INSERT, UPDATE, DELETE ON tenant_orders TO "+appCfg.ConnConfig.User)
	is.NoErr(err)

	app, err := pgxpool.NewWithConfig(ctx, appCfg)
	is.NoErr(err)
	t.Cleanup(app.Close)
	sysCfg := appCfg.Copy()
	sysCfg.ConnConfig.User = sysRole
	sys, err := pgxpool.NewWithConfig(ctx, sysCfg)
	is.NoErr(err)
	t.Cleanup(sys.Close)
	return &citusTenancyDB{owner: owner, app: app, sys: sys}
}

// count counts rows of table matching where, every scope (as the owner, a
// superuser).
func (d *citusTenancyDB) count(t *testing.T, table, where string, args ...any) int {
	t.Helper()
	var n int
	if err := d.owner.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// visible counts the rows of table the application role sees in a
// transaction of scope s (ApplyScope), routed and fanned out.
func (d *citusTenancyDB) visible(t *testing.T, s inbox.Scope, table string) (routed, fanOut int) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, d.app, func(tx pgx.Tx) error {
		if err := inbox.ApplyScope(ctx, tx, s); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE scope_id = $1", s.ID).Scan(&routed); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&fanOut)
	})
	if err != nil {
		t.Fatal(err)
	}
	return routed, fanOut
}

// Every accept path as the restricted application role on Citus: Accept
// (autocommit: its scope is SET LOCAL in a transaction of its own), its
// duplicate and conflict (the existing receipt read back under the scope),
// AcceptBatch of one scope and of several, group commit, AcceptTx and
// AcceptBatchTx in a caller's transaction that ApplyScope scoped or that has
// no scope yet. A tenant ID with a quote and a backslash is quoted safely.
func TestCitusTenancyAccept(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	d := newCitusTenancy(t)
	a, b, odd := inbox.Tenant("tenant-a"), inbox.Tenant("tenant-b"), inbox.Tenant(`o'brien\n`)
	c := newClient(t, d.app, inbox.Config{})

	res, err := c.Accept(ctx, tenantMsg(a, "acc-1"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	dup, err := c.Accept(ctx, tenantMsg(a, "acc-1"))
	is.NoErr(err)
	is.Equal(dup.Outcome, inbox.Duplicate)
	is.Equal(dup.ID, res.ID)
	conflicting := tenantMsg(a, "acc-1")
	conflicting.Payload = raw(`{"other":true}`)
	_, err = c.Accept(ctx, conflicting)
	var ce *inbox.ConflictError
	is.True(errors.As(err, &ce))
	is.Equal(ce.ReceiptID, res.ID)
	res, err = c.Accept(ctx, tenantMsg(odd, "acc-odd"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)

	items, err := c.AcceptBatch(ctx, []inbox.Message{tenantMsg(a, "batch-1"), tenantMsg(a, "batch-2"), tenantMsg(a, "acc-1")})
	is.NoErr(err)
	is.Equal([]inbox.Outcome{items[0].Outcome, items[1].Outcome, items[2].Outcome}, []inbox.Outcome{inbox.Accepted, inbox.Accepted, inbox.Duplicate})
	items, err = c.AcceptBatch(ctx, []inbox.Message{tenantMsg(a, "mixed-1"), tenantMsg(b, "mixed-2"), tenantMsg(inbox.Global(), "mixed-3")})
	is.NoErr(err)
	for _, it := range items {
		is.NoErr(it.Err)
		is.Equal(it.Outcome, inbox.Accepted)
	}

	gc := newClient(t, d.app, inbox.Config{GroupCommit: true})
	var wg sync.WaitGroup
	gcErrs := make([]error, 4)
	for i := range gcErrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			_, gcErrs[i] = gc.Accept(ctx, tenantMsg(s, fmt.Sprint("gc-", i)))
		}()
	}
	wg.Wait()
	for _, err := range gcErrs {
		is.NoErr(err)
	}

	// AcceptTx in a transaction ApplyScope scoped: the caller's own rows
	// under that scope commit with it.
	tx, err := d.app.Begin(ctx)
	is.NoErr(err)
	is.NoErr(inbox.ApplyScope(ctx, tx, a))
	res, err = c.AcceptTx(ctx, tx, tenantMsg(a, "tx-1"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	_, err = c.AcceptTx(ctx, tx, tenantMsg(b, "tx-other"))
	is.True(errors.Is(err, inbox.ErrScopeMismatch))
	_, err = tx.Exec(ctx, "INSERT INTO tenant_orders (tenant_id, order_id) VALUES ('tenant-a', 'tx-1')")
	is.NoErr(err)
	is.NoErr(tx.Commit(ctx))
	// AcceptTx in an unscoped transaction gives it the message's scope.
	tx, err = d.app.Begin(ctx)
	is.NoErr(err)
	res, err = c.AcceptTx(ctx, tx, tenantMsg(b, "tx-2"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	var n int
	is.NoErr(tx.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts").Scan(&n))
	is.Equal(n, 6) // tenant-b's only, on every worker: m0, m1, mixed-2, gc-1, gc-3, tx-2
	is.NoErr(tx.Commit(ctx))
	// AcceptBatchTx of two scopes in an unscoped transaction: each part
	// under its scope, and no scope left at the end, on the workers too.
	tx, err = d.app.Begin(ctx)
	is.NoErr(err)
	items, err = c.AcceptBatchTx(ctx, tx, []inbox.Message{tenantMsg(a, "btx-1"), tenantMsg(b, "btx-2")})
	is.NoErr(err)
	is.Equal([]inbox.Outcome{items[0].Outcome, items[1].Outcome}, []inbox.Outcome{inbox.Accepted, inbox.Accepted})
	is.NoErr(tx.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts").Scan(&n))
	is.Equal(n, 0)
	is.NoErr(tx.Commit(ctx))

	// acc-1, batch-1, batch-2, mixed-1, gc-0, gc-2, tx-1, btx-1 and m0, m1.
	is.Equal(d.count(t, "pginbox_receipts", "scope_id = 'tenant-a'"), 10)
	is.Equal(d.count(t, "pginbox_work", "scope_id = 'tenant-a'"), 10)
	is.Equal(d.count(t, "pginbox_receipts", "scope_id = 'tenant-b'"), 7)
	is.Equal(d.count(t, "pginbox_receipts", "scope_kind = 'global'"), 1)
	is.Equal(d.count(t, "pginbox_receipts", "scope_id = $1", odd.ID), 1)
	routed, fanOut := d.visible(t, a, "pginbox_receipts")
	is.Equal([]int{routed, fanOut}, []int{10, 10})
	routed, fanOut = d.visible(t, odd, "pginbox_receipts")
	is.Equal([]int{routed, fanOut}, []int{1, 1})
	is.Equal(d.count(t, "tenant_orders", "true"), 1)
}

// The worker as the prescribed roles on Citus: claims on the system pool,
// every handler transaction on the application role with the receipt's scope
// applied on the workers, so a handler's write into its tenant's rows of a
// colocated business table passes that table's policy and commits with the
// completion, and one into another tenant's rows is refused. A failed
// attempt is recorded under the scope and retried; a slot of several
// receipts runs in one transaction, then with a savepoint each after a
// failure. Events the handlers emit carry their tenant.
func TestCitusTenancyWorker(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	d := newCitusTenancy(t)
	c := newClient(t, d.app, inbox.Config{})
	a, b := inbox.Tenant("tenant-a"), inbox.Tenant("tenant-b")
	ids := acceptAll(t, c, tenantMsg(a, "own-1"), tenantMsg(a, "own-2"), tenantMsg(a, "flaky"),
		tenantMsg(a, "cross"), tenantMsg(b, "own-3"), tenantMsg(inbox.Global(), "global-1"))
	cross := ids[3]

	var mu sync.Mutex
	attempts := map[string]int{}
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		mu.Lock()
		attempts[m.Scope.ID+"/"+m.MessageID]++
		mu.Unlock()
		if m.Scope.Kind == inbox.ScopeGlobal {
			return nil
		}
		owner := m.Scope.ID
		if m.MessageID == "cross" {
			owner = "tenant-b" // a handler of tenant-a writing tenant-b's rows
		}
		if _, err := m.Tx.Exec(ctx, "INSERT INTO tenant_orders (tenant_id, order_id) VALUES ($1, $2)", owner, m.MessageID); err != nil {
			return handler.Permanent(err)
		}
		if _, err := outbox.Emit(ctx, m.Tx, outbox.Event{Type: "order.projected", SchemaVersion: 1, Payload: raw(`{}`), Source: "s", Destination: "d"}); err != nil {
			return err
		}
		if m.MessageID == "flaky" && m.Attempt == 1 {
			return errors.New("transient")
		}
		return nil
	})
	w := newWorker(t, d.app, reg, inbox.WorkerConfig{
		SystemPool:    d.sys,
		Concurrency:   1,
		MessagesPerTx: 10,
		Backoff:       func(int) time.Duration { return 10 * time.Millisecond },
	})
	startWorker(t, w)
	for _, id := range ids {
		if id == cross {
			continue
		}
		waitStatus(t, d.sys, id, "COMPLETED", 30*time.Second)
	}
	st := waitStatus(t, d.sys, cross, "DEAD", 30*time.Second)
	is.True(st.LastError != nil && strings.Contains(*st.LastError, "row-level security")) // the business table's policy, on the worker
	is.Equal(stateOf(t, d.sys, ids[2]).Attempts, 2)                                       // flaky: failed once (ReceiptFail under its scope), then completed

	var rows []string
	r, err := d.owner.Query(ctx, "SELECT tenant_id || '/' || order_id FROM tenant_orders ORDER BY 1")
	is.NoErr(err)
	for r.Next() {
		var s string
		is.NoErr(r.Scan(&s))
		rows = append(rows, s)
	}
	is.NoErr(r.Err())
	is.Equal(strings.Join(rows, " "), // with citusRestricted's m0 and m1
		"tenant-a/flaky tenant-a/m0 tenant-a/m1 tenant-a/own-1 tenant-a/own-2 tenant-b/m0 tenant-b/m1 tenant-b/own-3")
	// Emitted in the handlers' transactions (through the policy on the
	// worker): flaky's first attempt rolled back.
	is.Equal(d.count(t, "pginbox_outbox", "scope_kind = 'tenant' AND scope_id = 'tenant-a'"), 5)
	is.Equal(d.count(t, "pginbox_outbox", "scope_kind = 'tenant' AND scope_id = 'tenant-b'"), 3)
	// The tenant's business rows, as the application sees them under its scope.
	var n int
	is.NoErr(pgx.BeginFunc(ctx, d.app, func(tx pgx.Tx) error {
		if err := inbox.ApplyScope(ctx, tx, a); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT count(*) FROM tenant_orders").Scan(&n)
	}))
	is.Equal(n, 5)
}

// The admin as the application role on Citus: a tenant's view lists, reads,
// requeues, replays, counts and purges its receipts; another tenant's receipt is not found
// by it and stays unchanged. Under tenant-a's scope, raw SQL as the
// application role neither sees nor changes tenant-b's rows, and cannot
// write one; a work row pointing at a receipt of another scope is refused by
// the composite key, also for a role that bypasses row-level security.
func TestCitusTenancyAdminIsolation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	d := newCitusTenancy(t)
	c := newClient(t, d.app, inbox.Config{})
	a, b := inbox.Tenant("tenant-a"), inbox.Tenant("tenant-b")
	ids := acceptAll(t, c, tenantMsg(a, "bad-a"), tenantMsg(a, "good-a"), tenantMsg(b, "bad-b"))
	badA, goodA, badB := ids[0], ids[1], ids[2]
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		if strings.HasPrefix(m.MessageID, "bad") {
			return handler.Permanent(errors.New("bad message"))
		}
		return nil
	})
	// The citusRestricted receipts (m0, m1) complete too.
	w := newWorker(t, d.app, reg, inbox.WorkerConfig{SystemPool: d.sys})
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 7)
	is.Equal(stateOf(t, d.sys, badB).Status, "DEAD")

	admin, err := inbox.NewAdmin(d.app, inbox.AdminConfig{Logger: testLogger(t)})
	is.NoErr(err)
	va := admin.ForTenant("tenant-a")
	l, err := va.List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(l.Receipts), 4)
	for _, r := range l.Receipts {
		is.Equal(r.Scope, a)
	}
	got, err := va.Get(ctx, badA)
	is.NoErr(err)
	is.Equal(got.Status, inbox.StatusDead)
	change := func(v int64) inbox.ChangeParams {
		return inbox.ChangeParams{ExpectedVersion: v, Actor: "support", Reason: "test"}
	}
	rq, err := va.Requeue(ctx, badA, change(got.Version))
	is.NoErr(err)
	is.Equal(rq.FromStatus, inbox.StatusDead)
	is.Equal(stateOf(t, d.sys, badA).Status, "PENDING")
	done, err := va.Get(ctx, goodA)
	is.NoErr(err)
	rp, err := va.Replay(ctx, goodA, change(done.Version))
	is.NoErr(err)
	is.Equal(stateOf(t, d.sys, rp.NewID).Status, "PENDING")
	is.Equal(d.count(t, "pginbox_receipts", "id = $1 AND scope_id = 'tenant-a'", rp.NewID), 1)
	is.Equal(d.count(t, "pginbox_audit", "scope_id = 'tenant-a'"), 2)

	// tenant-a's view refuses tenant-b's receipt: not found, unchanged.
	before := rowSnapshot(t, d.sys, badB)
	_, err = va.Get(ctx, badB)
	is.True(errors.Is(err, inbox.ErrNotFound))
	_, err = va.Requeue(ctx, badB, change(stateOf(t, d.sys, badB).Version))
	is.True(errors.Is(err, inbox.ErrNotFound))
	_, err = va.Replay(ctx, badB, change(stateOf(t, d.sys, badB).Version))
	is.True(errors.Is(err, inbox.ErrNotFound))
	is.Equal(rowSnapshot(t, d.sys, badB), before)

	// Raw SQL as the application role under tenant-a's scope.
	var pgErr *pgconn.PgError
	err = pgx.BeginFunc(ctx, d.app, func(tx pgx.Tx) error {
		if err := inbox.ApplyScope(ctx, tx, a); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE scope_id = 'tenant-b'").Scan(&n); err != nil {
			return err
		}
		is.Equal(n, 0)
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE id = $1", badB).Scan(&n); err != nil {
			return err
		}
		is.Equal(n, 0) // fanned out: the policy holds on every worker
		for _, s := range []string{
			"UPDATE pginbox_work SET status = 'PENDING', version = version + 1 WHERE scope_id = 'tenant-b'",
			"UPDATE pginbox_receipts SET last_error = 'x' WHERE scope_id = 'tenant-b'",
			"DELETE FROM pginbox_receipts WHERE scope_id = 'tenant-b'",
		} {
			tag, err := tx.Exec(ctx, s)
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			is.Equal(tag.RowsAffected(), int64(0))
		}
		return nil
	})
	is.NoErr(err)
	is.Equal(rowSnapshot(t, d.sys, badB), before)
	err = pgx.BeginFunc(ctx, d.app, func(tx pgx.Tx) error {
		if err := inbox.ApplyScope(ctx, tx, a); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
			event_type, schema_version, fingerprint, payload, max_attempts)
			VALUES ($1, 'tenant', 'tenant-b', 's', 'c', 'forged', 'e', 1, '\x00', '{}', 3)`, inboxtype.New())
		return err
	})
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "42501") // the policy's WITH CHECK, on the worker

	// A work row of tenant-b naming tenant-a's completed receipt: the
	// composite key (receipt_id, scope_kind, scope_id) finds no tenant-b
	// receipt with that ID.
	forge := `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
		VALUES ($1, 'tenant', 'tenant-b', 'orders.projection.v1', 3)`
	err = pgx.BeginFunc(ctx, d.app, func(tx pgx.Tx) error {
		if err := inbox.ApplyScope(ctx, tx, b); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, forge, goodA)
		return err
	})
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "23503")
	_, err = d.sys.Exec(ctx, forge, goodA)
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "23503")
	is.Equal(d.count(t, "pginbox_work", "receipt_id = $1", goodA), 0)

	// The views' counts and purge, each of its own tenant's rows.
	st, err := va.Stats(ctx, inbox.StatsParams{IncludeCompleted: true})
	is.NoErr(err)
	is.Equal(st.Dead, int64(0)) // bad-a was requeued
	stB, err := admin.ForTenant("tenant-b").Stats(ctx, inbox.StatsParams{})
	is.NoErr(err)
	is.Equal(stB.Dead, int64(1))
	cutoff := time.Now()
	due, _, err := va.PurgeCount(ctx, inbox.PurgeParams{Before: cutoff})
	is.NoErr(err)
	is.Equal(due, int64(3)) // good-a, m0, m1
	purged, err := va.Purge(ctx, inbox.PurgeParams{Before: cutoff})
	is.NoErr(err)
	is.Equal(purged.Purged, int64(3))
	is.Equal(d.count(t, "pginbox_receipts", "payload_purged_at IS NOT NULL AND scope_id = 'tenant-a'"), 3)
	is.Equal(d.count(t, "pginbox_receipts", "payload_purged_at IS NOT NULL AND scope_id <> 'tenant-a'"), 0)
}

// Behind PgBouncer in transaction mode pginbox runs under the simple
// protocol, where a pipeline is one query string: the Citus scope (BEGIN,
// the SET LOCAL statements, the statement, COMMIT) still reaches the
// workers, for a tenant ID with a quote too.
func TestCitusTenancyUnderSimpleProtocol(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	d := newCitusTenancy(t)
	cfg := d.app.Config()
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	app, err := pgxpool.NewWithConfig(ctx, cfg)
	is.NoErr(err)
	t.Cleanup(app.Close)
	odd := inbox.Tenant(`it's`)
	c := newClient(t, app, inbox.Config{})
	res, err := c.Accept(ctx, tenantMsg(odd, "one"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	dup, err := c.Accept(ctx, tenantMsg(odd, "one"))
	is.NoErr(err)
	is.Equal(dup.Outcome, inbox.Duplicate)
	items, err := c.AcceptBatch(ctx, []inbox.Message{tenantMsg(odd, "two"), tenantMsg(inbox.Tenant("tenant-a"), "three")})
	is.NoErr(err)
	is.Equal([]inbox.Outcome{items[0].Outcome, items[1].Outcome}, []inbox.Outcome{inbox.Accepted, inbox.Accepted})
	admin, err := inbox.NewAdmin(app, inbox.AdminConfig{})
	is.NoErr(err)
	l, err := admin.ForScope(odd).List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(l.Receipts), 2)
	w := newWorker(t, app, registry(t, func(context.Context, *handler.Msg) error { return nil }), inbox.WorkerConfig{SystemPool: d.sys})
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 7) // and citusRestricted's four
	is.Equal(d.count(t, "pginbox_receipts", "status = 'COMPLETED'"), 7)
}

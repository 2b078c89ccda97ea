package inbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

var execModes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheStatement,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

// Accept sends the scope in the same pipelined batch as its statement, with
// no transaction of its own: the setting must reach the next statement of the
// batch and be gone once the batch ends, in every exec mode.
func TestScopeSetInABatchLastsForTheBatch(t *testing.T) {
	t.Parallel()
	for _, mode := range execModes {
		t.Run(mode.String(), func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			pool, _ := newPool(t, func(c *pgxpool.Config) {
				c.MaxConns = 1 // one session for everything below
				c.ConnConfig.DefaultQueryExecMode = mode
			})
			b := &pgx.Batch{}
			b.Queue("SELECT set_config('pginbox.tenant', $1, true)", "acme")
			b.Queue("SELECT coalesce(current_setting('pginbox.tenant', true), '')")
			br := pool.SendBatch(ctx, b)
			_, err := br.Exec()
			is.NoErr(err)
			var inBatch string
			is.NoErr(br.QueryRow().Scan(&inBatch))
			is.NoErr(br.Close())
			is.Equal(inBatch, "acme")

			var after string
			is.NoErr(pool.QueryRow(ctx, "SELECT coalesce(current_setting('pginbox.tenant', true), '')").Scan(&after))
			is.Equal(after, "")
		})
	}
}

// One pooled connection used for tenant A, then tenant B: B's transaction
// starts with no scope and sees only B's rows, in every exec mode, the
// simple protocol (PgBouncer) included. Nothing lives in the session.
func TestPooledConnectionReusedByAnotherTenantSeesOnlyItsRows(t *testing.T) {
	t.Parallel()
	for _, mode := range execModes {
		t.Run(mode.String(), func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			td := newTenancyDB(t, func(c *pgxpool.Config) {
				c.MaxConns = 1
				c.ConnConfig.DefaultQueryExecMode = mode
			})
			c := newClient(t, td.app, inbox.Config{})
			a, b := inbox.Tenant("a"), inbox.Tenant("b")
			acceptAll(t, c, tenantMsg(a, "a-1"), tenantMsg(a, "a-2"), tenantMsg(b, "b-1"))

			var pids [2]uint32
			for i, s := range []inbox.Scope{a, b} {
				err := pgx.BeginFunc(ctx, td.app, func(tx pgx.Tx) error {
					pids[i] = tx.Conn().PgConn().PID()
					var before string
					if err := tx.QueryRow(ctx, "SELECT coalesce(current_setting('pginbox.tenant', true), '')").Scan(&before); err != nil {
						return err
					}
					is.Equal(before, "") // nothing left from the previous transaction
					if err := inbox.ApplyScope(ctx, tx, s); err != nil {
						return err
					}
					rows, err := tx.Query(ctx, "SELECT scope_id FROM pginbox_receipts")
					if err != nil {
						return err
					}
					ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
					if err != nil {
						return err
					}
					is.True(len(ids) > 0)
					for _, id := range ids {
						is.Equal(id, s.ID)
					}
					return nil
				})
				is.NoErr(err)
			}
			is.Equal(pids[0], pids[1]) // the same session served both
			is.Equal(td.scopedCount(t, inbox.Scope{}, "pginbox_receipts"), 0)
		})
	}
}

// Under the application role, another tenant's rows are out of reach of raw
// SQL: reads find nothing, updates and deletes change nothing, and an insert
// into another scope is refused.
func TestAppRoleCannotTouchAnotherTenantsRows(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	td := newTenancyDB(t)
	c := newClient(t, td.app, inbox.Config{})
	ids := acceptAll(t, c, tenantMsg(inbox.Tenant("a"), "a-1"), tenantMsg(inbox.Tenant("b"), "b-1"), tenantMsg(inbox.Global(), "g-1"))
	bID := ids[1]
	_, err := td.sys.Exec(ctx, `INSERT INTO pginbox_audit (receipt_id, scope_kind, scope_id, action, actor, reason, from_status, to_status, from_version, to_version)
		VALUES ($1, 'tenant', 'b', 'requeue', 'ops', 'test', 'DEAD', 'PENDING', 0, 1)`, bID)
	is.NoErr(err)

	err = pgx.BeginFunc(ctx, td.app, func(tx pgx.Tx) error {
		is.NoErr(inbox.ApplyScope(ctx, tx, inbox.Tenant("a")))
		for _, table := range []string{"pginbox_receipts", "pginbox_work", "pginbox_receipts_live"} {
			var n int
			is.NoErr(tx.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE scope_kind <> 'tenant' OR scope_id <> 'a'").Scan(&n))
			is.Equal(n, 0) // table: nothing of b or global
		}
		var audit int
		is.NoErr(tx.QueryRow(ctx, "SELECT count(*) FROM pginbox_audit").Scan(&audit))
		is.Equal(audit, 0)
		for _, stmt := range []string{
			"UPDATE pginbox_receipts SET last_error = 'x' WHERE id = $1",
			"UPDATE pginbox_work SET attempts = attempts + 1 WHERE receipt_id = $1",
			"DELETE FROM pginbox_work WHERE receipt_id = $1",
			"DELETE FROM pginbox_receipts WHERE id = $1",
		} {
			tag, err := tx.Exec(ctx, stmt, bID)
			is.NoErr(err)
			is.Equal(tag.RowsAffected(), int64(0)) // stmt
		}
		return nil
	})
	is.NoErr(err)

	// An insert into another scope is refused by the policy's WITH CHECK.
	err = pgx.BeginFunc(ctx, td.app, func(tx pgx.Tx) error {
		is.NoErr(inbox.ApplyScope(ctx, tx, inbox.Tenant("a")))
		_, err := tx.Exec(ctx, `INSERT INTO pginbox_outbox (id, source, destination, event_type, schema_version, payload, scope_kind, scope_id)
			VALUES (gen_random_uuid(), 's', 'd', 'e', 1, '{}', 'tenant', 'b')`)
		return err
	})
	var pgErr *pgconn.PgError
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "42501") // insufficient_privilege: row-level security

	is.Equal(td.allCount(t, "pginbox_receipts_live", "id = $1 AND last_error IS NULL AND attempts = 0", bID), 1) // b's receipt untouched
	is.Equal(td.allCount(t, "pginbox_audit", "receipt_id = $1", bID), 1)
	is.Equal(td.scopedCount(t, inbox.Tenant("b"), "pginbox_receipts"), 1)
	is.Equal(td.scopedCount(t, inbox.Global(), "pginbox_receipts"), 1)
	is.Equal(td.scopedCount(t, inbox.Scope{}, "pginbox_receipts"), 0) // no scope: nothing
}

// The whole path under the simple protocol and without LISTEN, as behind
// PgBouncer in transaction mode: no prepared statement and no session state
// carries the scope, every transaction applies its own.
func TestTenancyUnderSimpleProtocol(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	td := newTenancyDB(t, func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		c.MaxConns = 4
	})
	c := newClient(t, td.app, inbox.Config{})
	a, b := inbox.Tenant("a"), inbox.Tenant("b")
	items, err := c.AcceptBatch(ctx, []inbox.Message{tenantMsg(a, "one"), tenantMsg(b, "one"), tenantMsg(inbox.Global(), "one")})
	is.NoErr(err)
	for _, it := range items {
		is.Equal(it.Outcome, inbox.Accepted)
	}
	w := newWorker(t, td.app, registry(t, func(ctx context.Context, m *handler.Msg) error {
		if m.Scope.Kind != inbox.ScopeTenant {
			return nil
		}
		_, err := m.Tx.Exec(ctx, "INSERT INTO tenant_orders (tenant_id, order_id) VALUES ($1, $2)", m.Scope.ID, m.MessageID)
		return err
	}), inbox.WorkerConfig{SystemPool: td.sys, PollOnly: true, Concurrency: 2})
	is.Equal(inboxtest.Drain(t, w), 3)
	is.Equal(td.allCount(t, "pginbox_receipts_live", "status = 'COMPLETED'"), 3)

	admin, err := inbox.NewAdmin(td.app, inbox.AdminConfig{Logger: testLogger(t)})
	is.NoErr(err)
	page, err := admin.ForTenant("b").List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 1)
	is.Equal(page.Receipts[0].Scope, b)
	is.Equal(td.scopedCount(t, a, "tenant_orders"), 1)
	is.Equal(td.scopedCount(t, b, "tenant_orders"), 1)
}

// ApplyScope refuses a scope that is neither a tenant nor global, before
// touching the transaction.
func TestApplyScopeRefusesAnInvalidScope(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		for _, s := range []inbox.Scope{{}, inbox.Tenant(""), {Kind: inbox.ScopeGlobal, ID: "x"}} {
			err := inbox.ApplyScope(context.Background(), tx, s)
			is.True(errors.Is(err, inbox.ErrInvalid)) // s
		}
		return nil
	})
	is.NoErr(err)
}

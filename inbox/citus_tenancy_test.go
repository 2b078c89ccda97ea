package inbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

// citusRestricted returns a Citus database with row-level security enabled,
// receipts of tenant-a and tenant-b (2 each), and the DSN of a restricted
// application role (no BYPASSRLS, not the owner).
func citusRestricted(t *testing.T) (owner *pgxpool.Pool, app *pgxpool.Config) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	owner, _ = citusPool(t)
	c := newClient(t, owner, inbox.Config{})
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		for i := range 2 {
			_, err := c.Accept(ctx, tenantMsg(inbox.Tenant(tenant), fmt.Sprint("m", i)))
			is.NoErr(err)
		}
	}
	// The whole ID: its first characters are a timestamp, which tests
	// running in parallel share.
	role := "app_" + strings.ToLower(inboxtype.New().String())
	_, err := owner.Exec(ctx, "CREATE ROLE "+role+" LOGIN")
	is.NoErr(err)
	stmts, err := schema.GrantStatements(role, false)
	is.NoErr(err)
	for _, s := range stmts {
		_, err := owner.Exec(ctx, s)
		is.NoErr(err)
	}
	is.NoErr(schema.EnableTenancy(ctx, owner))
	cfg, err := pgxpool.ParseConfig(owner.Config().ConnString())
	is.NoErr(err)
	cfg.ConnConfig.User = role
	return owner, cfg
}

// Which ways of setting the scope reach Citus's worker nodes, where the
// row-level security policies are evaluated (as the restricted role): why
// pginbox sets it with SET LOCAL in an explicit transaction on Citus
// (scope_citus.go), and that it then works.
func TestCitusTenancyScopeReachesWorkers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	_, app := citusRestricted(t)
	conn, err := pgx.ConnectConfig(ctx, app.ConnConfig.Copy())
	is.NoErr(err)
	defer conn.Close(ctx)

	routed := "SELECT count(*) FROM pginbox_receipts WHERE scope_id = 'tenant-a'"
	fanOut := "SELECT count(*) FROM pginbox_receipts"
	inTx := func(setup ...string) (r, f int) {
		tx, err := conn.Begin(ctx)
		is.NoErr(err)
		defer tx.Rollback(ctx)
		for _, s := range setup {
			_, err := tx.Exec(ctx, s)
			is.NoErr(err)
		}
		is.NoErr(tx.QueryRow(ctx, routed).Scan(&r))
		is.NoErr(tx.QueryRow(ctx, fanOut).Scan(&f))
		return r, f
	}
	const propagate = "SET LOCAL citus.propagate_set_commands = 'local'"
	// set_config(..., true), which ScopeApply sends, is a function, not a SET
	// command: Citus does not propagate it, even with propagation on.
	r, f := inTx(propagate, "SELECT set_config('pginbox.tenant', 'tenant-a', true)")
	is.Equal([]int{r, f}, []int{0, 0})
	// SET LOCAL with propagation reaches the workers, routed and fanned out.
	r, f = inTx(propagate, "SET LOCAL pginbox.tenant = 'tenant-a'")
	is.Equal([]int{r, f}, []int{2, 2})
	// Without propagation it does not.
	r, f = inTx("SET LOCAL pginbox.tenant = 'tenant-a'")
	is.Equal([]int{r, f}, []int{0, 0})
	// Set after the transaction already used the worker's connection, it
	// still reaches it.
	r, f = inTx(propagate, routed, fanOut, "SET LOCAL pginbox.tenant = 'tenant-a'")
	lateSet := []int{r, f}

	// In a pipeline without BEGIN (an implicit transaction, as pginbox's
	// scopedDB sends a statement with its scope), SET LOCAL does nothing.
	b := &pgx.Batch{}
	b.Queue(propagate)
	b.Queue("SET LOCAL pginbox.tenant = 'tenant-a'")
	b.Queue(routed)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	is.NoErr(err)
	_, err = br.Exec()
	is.NoErr(err)
	var n int
	is.NoErr(br.QueryRow().Scan(&n))
	is.NoErr(br.Close())
	is.Equal(n, 0)

	// Propagation set once for the session, SET LOCAL of the scope per
	// transaction.
	_, err = conn.Exec(ctx, "SET citus.propagate_set_commands = 'local'")
	is.NoErr(err)
	r, f = inTx("SET LOCAL pginbox.tenant = 'tenant-a'")
	is.Equal([]int{r, f}, []int{2, 2})
	is.Equal(lateSet, []int{2, 2})

	// pginbox as the restricted role: ApplyScope and every statement pginbox
	// sends with a scope use SET LOCAL with propagation on Citus, so the
	// accept passes the policy on the worker and a tenant's view sees its
	// receipts (citus_tenancy_paths_test.go covers every path).
	pool, err := pgxpool.NewWithConfig(ctx, app.Copy())
	is.NoErr(err)
	defer pool.Close()
	c := newClient(t, pool, inbox.Config{})
	res, err := c.Accept(ctx, tenantMsg(inbox.Tenant("tenant-a"), "new"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	is.NoErr(err)
	l, err := admin.ForTenant("tenant-a").List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(l.Receipts), 3)
	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	is.NoErr(inbox.ApplyScope(ctx, tx, inbox.Tenant("tenant-a")))
	is.NoErr(tx.QueryRow(ctx, fanOut).Scan(&n))
	is.Equal(n, 3)
}

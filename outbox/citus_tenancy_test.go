package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/schema"
)

// citusRoles returns a Citus database with row-level security on and pools
// as an application role (no BYPASSRLS, not the owner) and a system role
// (BYPASSRLS), beside the owner's.
func citusRoles(t *testing.T) (owner, app, sys *pgxpool.Pool) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.CitusDatabase(t)
	owner, _ = citusPool(t, dsn)
	as := func(system bool) *pgxpool.Pool {
		role := "app_" + strings.ToLower(inboxtype.New().String())
		_, err := owner.Exec(ctx, "CREATE ROLE "+role+" LOGIN")
		is.NoErr(err)
		stmts, err := schema.GrantStatements(role, system)
		is.NoErr(err)
		for _, s := range stmts {
			_, err := owner.Exec(ctx, s)
			is.NoErr(err)
		}
		cfg, err := pgxpool.ParseConfig(dsn)
		is.NoErr(err)
		cfg.ConnConfig.User = role
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		is.NoErr(err)
		t.Cleanup(pool.Close)
		return pool
	}
	app, sys = as(false), as(true)
	is.NoErr(schema.EnableTenancy(ctx, owner))
	return owner, app, sys
}

// On Citus with row-level security, the application role emits in a
// transaction ApplyScope scoped (the event is inserted on the scope's node,
// through the policy there), sees only its scope's events, and cannot emit
// without a scope; the relay on the system role publishes every tenant's
// events with their scope, into an inbox whose client runs as the
// application role (its accepts apply each message's scope on the workers).
func TestCitusTenancyEmitAndRelay(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	owner, app, sys := citusRoles(t)
	a := emitAs(t, app, "tenant-a", event("k1", 1), event("k1", 2))
	b := emitAs(t, app, "tenant-b", event("k1", 1))
	is.Equal(count(t, owner, "scope_id = 'tenant-a'"), 2)
	is.Equal(count(t, owner, "scope_id = 'tenant-b'"), 1)

	var n int
	is.NoErr(pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
		if err := inbox.ApplyScope(ctx, tx, inbox.Tenant("tenant-a")); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT count(*) FROM pginbox_outbox").Scan(&n) // every shard
	}))
	is.Equal(n, 2)
	err := pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
		_, err := outbox.Emit(ctx, tx, event("k2", 1)) // no scope: the global scope, which the policy refuses
		return err
	})
	var pgErr *pgconn.PgError
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "42501")

	client, err := inbox.NewClient(app, inbox.Config{})
	is.NoErr(err)
	rec := &recorder{}
	is.Equal(drain(t, newRelay(t, sys, rec, outbox.RelayConfig{})), 3)
	scopes := map[outbox.ID]inbox.Scope{}
	for _, m := range rec.messages() {
		scopes[m.ID] = m.Scope
	}
	is.Equal(scopes, map[outbox.ID]inbox.Scope{
		a[0]: inbox.Tenant("tenant-a"), a[1]: inbox.Tenant("tenant-a"), b[0]: inbox.Tenant("tenant-b"),
	})

	// Events into an inbox whose client runs as the application role.
	a = emitAs(t, app, "tenant-a", event("k3", 1))
	b = emitAs(t, app, "tenant-b", event("k3", 1))
	is.Equal(drain(t, newRelay(t, sys, outbox.InboxPublisher{Client: client}, outbox.RelayConfig{})), 2)
	for _, e := range []struct {
		id     outbox.ID
		tenant string
	}{{a[0], "tenant-a"}, {b[0], "tenant-b"}} {
		var n int
		is.NoErr(owner.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE scope_id = $1 AND message_id = $2",
			e.tenant, e.id.String()).Scan(&n))
		is.Equal(n, 1)
	}
}

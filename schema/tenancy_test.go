package schema_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

func tenancyState(t *testing.T, q schema.Querier) (enabled, forced int) {
	t.Helper()
	st, err := schema.TenancyStatus(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != len(schema.TenancyTables) {
		t.Fatalf("status has %d tables, want %d", len(st), len(schema.TenancyTables))
	}
	for _, s := range st {
		if s.Enabled {
			enabled++
		}
		if s.Forced {
			forced++
		}
	}
	return enabled, forced
}

// Migration 6 defines the policies but enforces nothing until EnableTenancy:
// a deployment that never enables tenancy sees every row as before.
func TestTenancyIsOffUntilEnabled(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	_, pool := open(t, inboxtest.Database(t))

	enabled, forced := tenancyState(t, pool)
	is.Equal(enabled, 0)
	is.Equal(forced, 0)

	is.NoErr(schema.EnableTenancy(ctx, pool))
	enabled, forced = tenancyState(t, pool)
	is.Equal(enabled, len(schema.TenancyTables))
	is.Equal(forced, len(schema.TenancyTables))

	is.NoErr(schema.DisableTenancy(ctx, pool))
	enabled, forced = tenancyState(t, pool)
	is.Equal(enabled, 0)
	is.Equal(forced, 0)
}

// A transaction that holds one of the tables for longer than the switch will
// wait: the switch gives up with ErrTablesBusy and changes nothing, and the
// caller's own transaction keeps its lock_timeout.
func TestTenancySwitchGivesWayToALongTransaction(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	_, pool := open(t, inboxtest.Database(t))
	holder, err := pool.Begin(ctx)
	is.NoErr(err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, "LOCK TABLE pginbox_outbox IN ROW EXCLUSIVE MODE")
	is.NoErr(err)

	err = schema.EnableTenancy(ctx, pool)
	if !errors.Is(err, schema.ErrTablesBusy) || !strings.Contains(err.Error(), "lock timeout") {
		t.Fatalf("EnableTenancy under a held lock = %v, want ErrTablesBusy after lock timeouts", err)
	}
	enabled, _ := tenancyState(t, pool)
	is.Equal(enabled, 0)

	is.NoErr(holder.Rollback(ctx))
	is.NoErr(pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '7s'"); err != nil {
			return err
		}
		if err := schema.EnableTenancy(ctx, tx); err != nil {
			return err
		}
		var lt string
		if err := tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&lt); err != nil {
			return err
		}
		is.Equal(lt, "7s")
		return nil
	}))
	enabled, _ = tenancyState(t, pool)
	is.Equal(enabled, len(schema.TenancyTables))
}

// An outbox event takes the scope of the transaction that emits it.
func TestOutboxScopeFollowsTheTransaction(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	_, pool := open(t, inboxtest.Database(t))

	insert := func(tenant string) (kind, id string) {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if tenant != "" {
				if _, err := tx.Exec(ctx, "SELECT set_config('pginbox.tenant', $1, true)", tenant); err != nil {
					return err
				}
			}
			return tx.QueryRow(ctx, `INSERT INTO pginbox_outbox (id, source, destination, event_type, schema_version, payload)
				VALUES ($1, 's', 'd', 'e', 1, '{}') RETURNING scope_kind, scope_id`, inboxtype.New()).Scan(&kind, &id)
		})
		is.NoErr(err)
		return kind, id
	}
	kind, id := insert("acme")
	is.Equal(kind, "tenant")
	is.Equal(id, "acme")
	kind, id = insert("")
	is.Equal(kind, "global")
	is.Equal(id, "")
}

func TestGrantStatementsRefuseOddRoleNames(t *testing.T) {
	is := is.New(t)
	for _, bad := range []string{"", "App", "a b", "x; DROP TABLE pginbox_receipts", `"q"`, "1abc"} {
		_, err := schema.GrantStatements(bad, false)
		is.True(errors.Is(err, schema.ErrBadRoleName))
	}
	stmts, err := schema.GrantStatements("shop_app", false)
	is.NoErr(err)
	is.True(strings.Contains(strings.Join(stmts, ";"), "NOBYPASSRLS"))
	stmts, err = schema.GrantStatements("shop_worker", true)
	is.NoErr(err)
	is.True(strings.Contains(strings.Join(stmts, ";"), " BYPASSRLS"))
}

// The grants work on a real role, and under enabled tenancy that role (no
// BYPASSRLS, not the owner) sees only the rows of the scope it set.
func TestGrantedRoleSeesOnlyItsScope(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	_, pool := open(t, dsn)

	role := "pginbox_t_" + strings.ToLower(inboxtype.New().String())
	_, err := pool.Exec(ctx, "CREATE ROLE "+role)
	is.NoErr(err)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = pool.Exec(context.Background(), "DROP ROLE "+role)
	})
	stmts, err := schema.GrantStatements(role, false)
	is.NoErr(err)
	for _, s := range stmts {
		_, err := pool.Exec(ctx, s)
		is.NoErr(err)
	}
	for _, tenant := range []string{"a", "b"} {
		_, err := pool.Exec(ctx, `INSERT INTO pginbox_outbox (id, source, destination, event_type, schema_version, payload, scope_kind, scope_id)
			VALUES ($1, 's', 'd', 'e', 1, '{}', 'tenant', $2)`, inboxtype.New(), tenant)
		is.NoErr(err)
	}
	is.NoErr(schema.EnableTenancy(ctx, pool))

	count := func(tenant string) (n int) {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+role); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "SELECT set_config('pginbox.tenant', $1, true)", tenant); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT count(*) FROM pginbox_outbox").Scan(&n)
		})
		is.NoErr(err)
		return n
	}
	is.Equal(count("a"), 1)
	is.Equal(count("b"), 1)
	is.Equal(count(""), 0)
	is.Equal(count("c"), 0)
}

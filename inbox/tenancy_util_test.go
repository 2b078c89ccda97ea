package inbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

// tenancyDB is a fresh database with row-level security enabled and pools
// connected as the roles the docs prescribe: owner (the superuser that ran
// the migrations), app (no BYPASSRLS, not the owner) and sys (BYPASSRLS).
type tenancyDB struct {
	owner, app, sys *pgxpool.Pool
	appRole         string
	dsn             string // the database, as the owner
}

// businessPolicy is an application's own table under the same tenant
// setting pginbox applies, as the docs tell applications to write it.
const businessPolicy = `
CREATE TABLE tenant_orders (tenant_id text NOT NULL, order_id text NOT NULL, PRIMARY KEY (tenant_id, order_id));
ALTER TABLE tenant_orders ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_orders_scope ON tenant_orders
    USING (tenant_id = current_setting('pginbox.tenant', true))
    WITH CHECK (tenant_id = current_setting('pginbox.tenant', true));
`

// createRole creates login role name with the grants schema.GrantStatements
// gives an application (system false) or a worker role, dropped at test end
// after the role's pools closed (cleanups run last-in first-out).
func createRole(t testing.TB, owner *pgxpool.Pool, name string, system bool) {
	t.Helper()
	ctx := context.Background()
	if _, err := owner.Exec(ctx, "CREATE ROLE "+name+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = owner.Exec(context.Background(), "DROP OWNED BY "+name)
		_, _ = owner.Exec(context.Background(), "DROP ROLE "+name)
	})
	stmts, err := schema.GrantStatements(name, system)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := owner.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func newTenancyDB(t testing.TB, configure ...func(*pgxpool.Config)) *tenancyDB {
	t.Helper()
	ctx := context.Background()
	owner, dsn := newPool(t)
	suffix := strings.ToLower(inboxtype.New().String())
	td := &tenancyDB{owner: owner, appRole: "pginbox_t_app_" + suffix, dsn: dsn}
	sysRole := "pginbox_t_sys_" + suffix
	createRole(t, owner, td.appRole, false)
	createRole(t, owner, sysRole, true)
	if _, err := owner.Exec(ctx, businessPolicy); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, "GRANT SELECT, INSERT, UPDATE, DELETE ON tenant_orders TO "+td.appRole); err != nil {
		t.Fatal(err)
	}
	if err := schema.EnableTenancy(ctx, owner); err != nil {
		t.Fatal(err)
	}
	as := func(role string) func(*pgxpool.Config) {
		return func(c *pgxpool.Config) {
			c.ConnConfig.User = role
			for _, f := range configure {
				f(c)
			}
		}
	}
	td.app = poolFor(t, dsn, as(td.appRole))
	td.sys = poolFor(t, dsn, as(sysRole))
	return td
}

// scopedCount counts rows of table visible to the app role in scope s (no
// scope when s is zero).
func (td *tenancyDB) scopedCount(t testing.TB, s inbox.Scope, table string) int {
	t.Helper()
	var n int
	err := pgx.BeginFunc(context.Background(), td.app, func(tx pgx.Tx) error {
		if s.Kind != "" {
			if err := inbox.ApplyScope(context.Background(), tx, s); err != nil {
				return err
			}
		}
		return tx.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// allCount counts rows of every scope, on the sys pool (BYPASSRLS): the owner
// is held to the policies too (FORCE).
func (td *tenancyDB) allCount(t testing.TB, table, where string, args ...any) int {
	t.Helper()
	var n int
	if err := td.sys.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func tenantMsg(scope inbox.Scope, id string) inbox.Message {
	m := orderMsg(id, raw(`{"orderId":"`+id+`"}`))
	m.Scope = scope
	return m
}

package main

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

// newRole creates a login role with a unique name (roles are shared by every
// database of the cluster) and drops it, with its grants, when t ends.
func newRole(t *testing.T, pool *pgxpool.Pool, prefix, attrs string) string {
	t.Helper()
	ctx := context.Background()
	role := prefix + "_" + strings.ToLower(inboxtype.New().String()[16:])
	if _, err := pool.Exec(ctx, "CREATE ROLE "+role+" LOGIN "+attrs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = pool.Exec(ctx, "DROP OWNED BY "+role)
		if _, err := pool.Exec(ctx, "DROP ROLE "+role); err != nil {
			t.Logf("dropping role %s: %v", role, err)
		}
	})
	return role
}

// dsnAs is dsn connecting as role (the test cluster trusts local roles).
func dsnAs(t *testing.T, dsn, role string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(role)
		return u.String()
	}
	return dsn + " user=" + role // a later keyword wins
}

// TestTenancyLifecycle: grant an application role, enable, read the status as
// the operator and as that role, refuse and then do a disable.
func TestTenancyLifecycle(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	app := newRole(t, f.pool, "shop_app", "")
	owner := map[string]string{"DATABASE_URL": f.dsn}
	asApp := map[string]string{"DATABASE_URL": dsnAs(t, f.dsn, app)}

	status := func(db map[string]string) jsonTenancyStatus {
		t.Helper()
		code, stdout, stderr := runIn(t, db, "tenancy", "status", "--json")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		var st jsonTenancyStatus
		is.NoErr(json.Unmarshal([]byte(stdout), &st))
		return st
	}
	st := status(owner)
	is.Equal(st.Enabled, false)
	is.Equal(len(st.Tables), 4)
	is.True(st.Role.Superuser && st.Role.Bypasses)

	code, stdout, stderr := runIn(t, owner, "tenancy", "grant", app)
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "GRANT SELECT, INSERT, UPDATE, DELETE ON pginbox_receipts, pginbox_work, pginbox_outbox TO "+app+";"))
	is.True(strings.Contains(stdout, "GRANT SELECT, INSERT ON pginbox_audit TO "+app+";"))
	is.True(strings.Contains(stdout, "role "+app+" may now use pginbox inside the scope its transactions set"))

	// Before enable the application role sees every scope, as before v6.
	code, stdout, _ = runIn(t, asApp, "list", "--json", "--tenant", "tenant-b")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, f.other.String()))
	code, stdout, _ = runIn(t, asApp, "tenancy", "status")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "tenancy: disabled"))

	code, stdout, stderr = runIn(t, owner, "tenancy", "enable")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "row-level security enabled and forced on pginbox_receipts, pginbox_work, pginbox_audit, pginbox_outbox"))
	code, _, _ = runIn(t, owner, "tenancy", "enable") // again: nothing to change
	is.Equal(code, exitOK)

	st = status(owner)
	is.True(st.Enabled)
	for _, tb := range st.Tables {
		is.True(tb.Enabled && tb.Forced)
	}
	st = status(asApp)
	is.True(st.Enabled)
	is.Equal(st.Role, jsonRole{Name: app})
	code, stdout, _ = runIn(t, asApp, "tenancy", "status")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "pginbox_outbox    enabled       yes"))
	is.True(strings.Contains(stdout, "tenancy: enabled"))
	is.True(strings.Contains(stdout, "role "+app+": held to row-level security"))

	// The database now hides every row from a raw query without a scope.
	var n int
	is.NoErr(f.pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts").Scan(&n))
	is.Equal(n, 4) // the superuser bypasses it
	appPool, err := pgxpool.New(context.Background(), dsnAs(t, f.dsn, app))
	is.NoErr(err)
	defer appPool.Close()
	is.NoErr(appPool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts").Scan(&n))
	is.Equal(n, 0)

	code, stdout, stderr = runIn(t, owner, "tenancy", "disable")
	is.Equal(code, exitUsage)
	is.Equal(stdout, "")
	is.True(strings.Contains(stderr, "refusing to disable row-level security without --yes: it opens every tenant's rows to every role with pginbox's grants; nothing changed"))
	is.True(status(owner).Enabled)
	code, stdout, _ = runIn(t, owner, "tenancy", "disable", "--yes")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "`inbox tenancy enable` turns them back on"))
	st = status(owner)
	is.Equal(st.Enabled, false)
	for _, tb := range st.Tables {
		is.True(!tb.Enabled && !tb.Forced)
	}
	is.NoErr(appPool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts").Scan(&n))
	is.Equal(n, 4)
}

// TestTenancyOwnerIsNotSuperuser follows the recipe with a table owner that
// is not a superuser: it migrates, grants the application role and enables;
// BYPASSRLS for the system role needs a superuser, and grant says so and
// prints the SQL to hand over, with nothing changed.
func TestTenancyOwnerIsNotSuperuser(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.EmptyDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	is.NoErr(err)
	defer pool.Close()
	owner := newRole(t, pool, "shop_owner", "")
	app := newRole(t, pool, "shop_app", "")
	sys := newRole(t, pool, "shop_system", "")
	_, err = pool.Exec(ctx, "GRANT CREATE ON SCHEMA public TO "+owner)
	is.NoErr(err)
	asOwner := map[string]string{"DATABASE_URL": dsnAs(t, dsn, owner)}
	asApp := map[string]string{"DATABASE_URL": dsnAs(t, dsn, app)}

	// Not migrated: every subcommand says what to run.
	for _, args := range [][]string{{"status"}, {"enable"}, {"disable", "--yes"}, {"grant", app}} {
		code, _, stderr := runIn(t, asOwner, append([]string{"tenancy"}, args...)...)
		if code != exitNotMigrated || !strings.Contains(stderr, "run `inbox migrate up`") {
			t.Errorf("inbox tenancy %s before migrate: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
	}
	code, _, stderr := runIn(t, asOwner, "migrate", "up")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)

	code, stdout, stderr := runIn(t, asOwner, "tenancy", "grant", app)
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	is.True(!strings.Contains(stdout, "BYPASSRLS")) // already without it: no superuser needed

	code, stdout, stderr = runIn(t, asOwner, "tenancy", "grant", sys, "--system")
	is.Equal(code, exitError)
	is.Equal(stdout, "")
	is.True(strings.Contains(stderr, "granting BYPASSRLS to role "+sys+" needs a superuser"))
	is.True(strings.Contains(stderr, "nothing changed: ask a superuser to run:\n  GRANT SELECT ON pginbox_schema_version TO "+sys+";\n"))
	is.True(strings.Contains(stderr, "\n  ALTER ROLE "+sys+" BYPASSRLS;\n"))
	var granted bool
	is.NoErr(pool.QueryRow(ctx, "SELECT has_table_privilege($1, 'pginbox_receipts', 'SELECT')", sys).Scan(&granted))
	is.Equal(granted, false) // one transaction: the GRANTs rolled back too
	// The recipe of docs/TENANCY.md: a superuser creates the system role with
	// BYPASSRLS, and the owner grants the rest.
	sysReady := newRole(t, pool, "shop_system", "BYPASSRLS")
	code, stdout, stderr = runIn(t, asOwner, "tenancy", "grant", sysReady, "--system")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	is.True(!strings.Contains(stdout, "ALTER ROLE"))
	is.True(strings.Contains(stdout, "role "+sysReady+" may now work across tenants (BYPASSRLS)"))
	is.NoErr(pool.QueryRow(ctx, "SELECT has_table_privilege($1, 'pginbox_work', 'UPDATE')", sysReady).Scan(&granted))
	is.True(granted)

	code, stdout, _ = runIn(t, nil, "tenancy", "grant", sys, "--system", "--print")
	is.Equal(code, exitOK)
	is.True(strings.HasSuffix(stdout, "GRANT SELECT ON pginbox_receipts_live TO "+sys+";\nALTER ROLE "+sys+" BYPASSRLS;\n"))

	// Only the owner may change row-level security or grant.
	code, _, stderr = runIn(t, asApp, "tenancy", "enable")
	is.Equal(code, exitError)
	is.True(strings.Contains(stderr, "connect as the role that owns pginbox's tables (the one that ran `inbox migrate up`)"))
	code, _, stderr = runIn(t, asApp, "tenancy", "grant", sys)
	is.Equal(code, exitError)
	is.True(strings.Contains(stderr, "role "+app+" does not own pginbox's tables, so it cannot grant privileges on them; nothing changed: connect as the role that ran `inbox migrate up`"))
	is.True(strings.Contains(stderr, "\n  GRANT SELECT ON pginbox_receipts_live TO "+sys+";"))

	code, _, stderr = runIn(t, asOwner, "tenancy", "enable")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	code, stdout, _ = runIn(t, asOwner, "tenancy", "status")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "role "+owner+": owns the tables: held to row-level security while it is forced, but may turn it off"))
}

// TestTenancyGrantRefusals: roles that must not be application roles, roles
// that do not exist, and names that are not identifiers.
func TestTenancyGrantRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := map[string]string{"DATABASE_URL": f.dsn}
	missing := "shop_nobody_" + strings.ToLower(inboxtype.New().String()[16:])
	for _, tc := range []struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		{db, []string{"grant"}, exitUsage, "want one ROLE"},
		{nil, []string{"grant", "Shop App", "--print"}, exitUsage, `role "Shop App": want a lower-case SQL identifier`},
		{db, []string{"grant", "x; DROP TABLE pginbox_receipts"}, exitUsage, "want a lower-case SQL identifier"},
		{db, []string{"grant", missing}, exitError, "role " + missing + " does not exist: create it first (as a superuser or a role with CREATEROLE), e.g. CREATE ROLE " + missing + " LOGIN"},
		{db, []string{"grant", "postgres"}, exitError, "role postgres is a superuser, and row-level security never applies to a superuser"},
		{db, []string{"frobnicate"}, exitUsage, `unknown subcommand "frobnicate": want status, grant, enable or disable`},
		{db, []string{"status", "extra"}, exitUsage, "status takes no arguments"},
		{db, []string{"enable", "--yes"}, exitUsage, "unknown flag --yes"},
	} {
		code, stdout, stderr := runIn(t, tc.env, append([]string{"tenancy"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("inbox tenancy %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.code, tc.want)
		}
	}

	// The owner as application role: it could turn row-level security off.
	ctx := context.Background()
	owner := newRole(t, f.pool, "shop_owner", "")
	_, err := f.pool.Exec(ctx, "ALTER TABLE pginbox_receipts OWNER TO "+owner)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runIn(t, db, "tenancy", "grant", owner)
	if code != exitError || !strings.Contains(stderr, "role "+owner+" owns pginbox's tables, so it can turn row-level security off: give the application a role of its own") {
		t.Errorf("grant to the owner: exit %d, stderr %q", code, stderr)
	}
}

// TestTenantFlagUnderRLS: with tenancy enabled and DATABASE_URL on the
// application role, --tenant shows that tenant's receipts only, the database
// hides the others (another tenant's ID is not found), and a view across
// scopes says what to do instead of showing nothing.
func TestTenantFlagUnderRLS(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	app := newRole(t, f.pool, "shop_app", "")
	owner := map[string]string{"DATABASE_URL": f.dsn, "USER": "tester"}
	asApp := map[string]string{"DATABASE_URL": dsnAs(t, f.dsn, app), "USER": "tester"}
	for _, args := range [][]string{{"tenancy", "grant", app}, {"tenancy", "enable"}} {
		code, _, stderr := runIn(t, owner, args...)
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
	}

	code, stdout, stderr := runIn(t, asApp, "list", "--json", "--tenant", "tenant-a")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	var page jsonList
	is.NoErr(json.Unmarshal([]byte(stdout), &page))
	is.Equal(len(page.Receipts), 2)
	for _, r := range page.Receipts {
		is.Equal(r.Scope, jsonScope{Kind: "tenant", ID: "tenant-a"})
	}
	code, stdout, _ = runIn(t, asApp, "stats", "--json", "--tenant", "tenant-a")
	is.Equal(code, exitOK)
	var st jsonStats
	is.NoErr(json.Unmarshal([]byte(stdout), &st))
	is.Equal(st.Dead, int64(1)) // tenant-b's DEAD receipt is not counted
	code, stdout, _ = runIn(t, asApp, "show", f.dead.String(), "--tenant", "tenant-a")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "DEAD"))
	code, _, stderr = runIn(t, asApp, "show", f.other.String(), "--tenant", "tenant-a")
	is.Equal(code, exitNotFound)
	is.True(strings.Contains(stderr, "receipt not found"))
	code, stdout, _ = runIn(t, asApp, "list", "--json", "--global")
	is.Equal(code, exitOK)
	is.NoErr(json.Unmarshal([]byte(stdout), &page))
	is.Equal(len(page.Receipts), 1)
	is.Equal(page.Receipts[0].ID, f.pending.String())
	// A change through the tenant view works under RLS and is audited.
	code, _, stderr = runIn(t, asApp, "requeue", f.dead.String(), "--tenant", "tenant-a", "--version", "3", "--reason", "fixed")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	code, _, _ = runIn(t, asApp, "requeue", f.other.String(), "--tenant", "tenant-a", "--version", "3", "--reason", "not mine")
	is.Equal(code, exitNotFound)

	// Every scope at once needs the system role.
	for _, args := range [][]string{{"list"}, {"stats"}, {"show", f.other.String()}} {
		code, stdout, stderr := runIn(t, asApp, args...)
		if code != exitError || stdout != "" ||
			!strings.Contains(stderr, "row-level security restricts this role to one scope") ||
			!strings.Contains(stderr, "hint: pass --tenant ID (or --global) to see one scope, or connect as a role with BYPASSRLS for every scope (`inbox tenancy grant ROLE --system`)") {
			t.Errorf("inbox %s on the application role: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr)
		}
	}

	// The outbox commands work across tenants: they say so instead of
	// showing an empty outbox.
	code, stdout, stderr = runIn(t, asApp, "outbox", "stats")
	is.Equal(code, exitError)
	is.Equal(stdout, "")
	is.True(strings.Contains(stderr, "inbox outbox stats: row-level security hides the outbox's events from this role, and these commands work across tenants: connect as a role with BYPASSRLS (`inbox tenancy grant ROLE --system`)"))

	// The system role sees every scope.
	sys := newRole(t, f.pool, "shop_system", "")
	code, _, stderr = runIn(t, owner, "tenancy", "grant", sys, "--system")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	code, stdout, _ = runIn(t, map[string]string{"DATABASE_URL": dsnAs(t, f.dsn, sys)}, "list", "--json")
	is.Equal(code, exitOK)
	is.NoErr(json.Unmarshal([]byte(stdout), &page))
	is.Equal(len(page.Receipts), 4)
	code, _, stderr = runIn(t, map[string]string{"DATABASE_URL": dsnAs(t, f.dsn, sys)}, "outbox", "stats")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
}

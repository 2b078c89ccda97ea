package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

// serveAdmin starts the console on admin with the defaults.
func serveAdmin(t *testing.T, admin *inbox.Admin) *browser {
	t.Helper()
	h, err := console.New(admin, console.Config{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return newBrowser(t, srv)
}

func TestSchemaNotMigrated(t *testing.T) {
	t.Parallel()
	b := serveAdmin(t, mustAdmin(t, newEmptyPool(t)))
	for _, path := range []string{"/", "/receipts", "/dead", "/purge?older_than=30d"} {
		res := b.get(path)
		wantCode(t, res, http.StatusServiceUnavailable)
		wantBody(t, res, "Schema not migrated", "inbox migrate up")
	}
}

func TestDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "host=/nonexistent-pginbox-socket-dir dbname=none connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b := serveAdmin(t, mustAdmin(t, pool))
	res := b.get("/")
	wantCode(t, res, http.StatusInternalServerError)
	wantBody(t, res, "The database call failed", "Check that PostgreSQL is reachable", "nonexistent-pginbox-socket-dir")

	// A tenant's user learns that it failed, not where the database is.
	h, err := console.New(mustAdmin(t, pool), console.Config{Logger: quietLog, Authenticate: tenantHook})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tb := newBrowser(t, srv)
	tb.header.Set("X-User", "alice")
	tb.header.Set("X-Tenant", "tenant-a")
	res = tb.get("/")
	wantCode(t, res, http.StatusInternalServerError)
	wantBody(t, res, "could not reach its database", "server&#39;s log")
	wantNoBody(t, res, "nonexistent-pginbox-socket-dir")
}

func TestOversizedFormIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := newBrowser(t, f.serve(t, console.Config{}))
	token, version := formValues(t, b.get("/receipts/"+f.dead.String()).body)
	res := b.post("/receipts/"+f.dead.String()+"/requeue", url.Values{"csrf": {token}, "version": {version}, "reason": {strings.Repeat("x", 70<<10)}})
	wantCode(t, res, http.StatusBadRequest)
	wantBody(t, res, "could not be read", "at most 64 KiB")
	// A reason over the audit trail's limit is refused by the admin API, and
	// the page says so.
	res = b.post("/receipts/"+f.dead.String()+"/requeue", url.Values{"csrf": {token}, "version": {version}, "reason": {strings.Repeat("x", inbox.MaxReasonBytes+1)}})
	wantCode(t, res, http.StatusBadRequest)
	wantBody(t, res, "Invalid request", "reason", "at most 1024")
	if st, _ := f.state(t, f.dead); st != "DEAD" || f.auditCount(t) != 0 {
		t.Fatal("a refused form changed the receipt")
	}
}

// A console of every scope on a role that row-level security holds to one
// scope would show nothing; it says so and how to start it instead.
func TestTenancyRestrictedRoleIsExplained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	owner, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	role := "pginbox_t_console_" + strings.ToLower(inboxtype.New().String())
	if _, err := owner.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = owner.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = owner.Exec(context.Background(), "DROP ROLE "+role)
	})
	stmts, err := schema.GrantStatements(role, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := owner.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := schema.EnableTenancy(ctx, owner); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = role
	app, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)

	b := serveAdmin(t, mustAdmin(t, app))
	res := b.get("/")
	wantCode(t, res, http.StatusForbidden)
	wantBody(t, res, "Row-level security", "--tenant", "BYPASSRLS")
}

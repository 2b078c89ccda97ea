package tenancy_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/examples/tenancy"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// service is the example deployed on a test database: the application pool
// on a restricted role, the system pool on a BYPASSRLS role, and the owner's.
type service struct {
	owner, app, system *pgxpool.Pool
	appRole            string
	appDSN, systemDSN  string
	client             *inbox.Client
	worker             *inbox.Worker
}

func deploy(t *testing.T) *service {
	t.Helper()
	ctx := context.Background()
	dsn := inboxtest.Database(t) // migrated, owned by the cluster's superuser
	s := &service{owner: open(t, dsn, 4)}
	suffix := strings.ToLower(inboxtype.New().String()[16:]) // roles are per cluster
	s.appRole = "tenancy_app_" + suffix
	sysRole := "tenancy_system_" + suffix
	for _, r := range []string{s.appRole + " LOGIN", sysRole + " LOGIN BYPASSRLS"} {
		if _, err := s.owner.Exec(ctx, "CREATE ROLE "+r); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, r := range []string{s.appRole, sysRole} {
			_, _ = s.owner.Exec(context.Background(), "DROP OWNED BY "+r)
			_, _ = s.owner.Exec(context.Background(), "DROP ROLE "+r)
		}
	})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := tenancy.Setup(ctx, conn, s.appRole, sysRole); err != nil {
		t.Fatal(err)
	}
	s.appDSN, s.systemDSN = dsnAs(t, dsn, s.appRole), dsnAs(t, dsn, sysRole)
	s.app = open(t, s.appDSN, 4)
	s.system = open(t, s.systemDSN, 3)

	s.client, err = inbox.NewClient(s.app, inbox.Config{Consumers: []string{tenancy.Consumer}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	if err := tenancy.Register(reg); err != nil {
		t.Fatal(err)
	}
	s.worker, err = inbox.NewWorker(s.app, reg, inbox.WorkerConfig{SystemPool: s.system, Concurrency: 2, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func open(t *testing.T, dsn string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
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

func (s *service) accept(t *testing.T, tenant, id string, p tenancy.OrderImported) inbox.ID {
	t.Helper()
	res, err := s.client.Accept(context.Background(), inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Tenant(tenant), Source: "partner", Consumer: tenancy.Consumer, MessageID: id},
		EventType: tenancy.EventType, SchemaVersion: 1, Payload: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// TestHandlersWriteOnlyTheirTenantsRows: each handler's write to its own
// tenant's rows commits with the completion; a handler that writes another
// tenant's row is refused by the table's policy, so its receipt is retried
// and the row never exists.
func TestHandlersWriteOnlyTheirTenantsRows(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := deploy(t)

	var bypass, owns bool
	is.NoErr(s.owner.QueryRow(context.Background(),
		`SELECT rolbypassrls, pg_has_role(rolname, (SELECT relowner FROM pg_class WHERE relname = 'tenancy_orders'), 'MEMBER')
		 FROM pg_roles WHERE rolname = $1`, s.appRole).Scan(&bypass, &owns))
	is.True(!bypass && !owns) // the handlers run on a restricted role

	a := s.accept(t, "a", "evt-1", tenancy.OrderImported{TenantID: "a", OrderID: "o-1", TotalCents: 100})
	b := s.accept(t, "b", "evt-1", tenancy.OrderImported{TenantID: "b", OrderID: "o-2", TotalCents: 200})
	// Tenant a's message names tenant b: the handler trusts the payload.
	foreign := s.accept(t, "a", "evt-2", tenancy.OrderImported{TenantID: "b", OrderID: "o-3", TotalCents: 300})
	is.Equal(inboxtest.Drain(t, s.worker), 3)

	inboxtest.WaitForStatus(t, s.owner, a, inbox.StatusCompleted, 0)
	inboxtest.WaitForStatus(t, s.owner, b, inbox.StatusCompleted, 0)
	r := inboxtest.WaitForStatus(t, s.owner, foreign, inbox.StatusRetryable, 0)
	is.Equal(r.Attempts, 1)
	is.True(strings.Contains(r.LastError, `new row violates row-level security policy for table "tenancy_orders"`)) // the policy's refusal

	var rows []string
	all, err := s.owner.Query(context.Background(), "SELECT tenant_id || '/' || order_id FROM tenancy_orders ORDER BY 1")
	is.NoErr(err)
	rows, err = pgx.CollectRows(all, pgx.RowTo[string])
	is.NoErr(err)
	is.Equal(rows, []string{"a/o-1", "b/o-2"}) // no b/o-3
}

// TestAPIReadsOnlyItsTenantsRows: tenant a's API transaction (ApplyScope)
// cannot read, change or create tenant b's rows, though its queries carry no
// tenant predicate; a transaction that applied no scope sees no row.
func TestAPIReadsOnlyItsTenantsRows(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	s := deploy(t)
	s.accept(t, "a", "evt-1", tenancy.OrderImported{TenantID: "a", OrderID: "o-1", TotalCents: 100})
	s.accept(t, "b", "evt-1", tenancy.OrderImported{TenantID: "b", OrderID: "o-2", TotalCents: 200})
	is.Equal(inboxtest.Drain(t, s.worker), 2)

	got, err := tenancy.Orders(ctx, s.app, "a")
	is.NoErr(err)
	is.Equal(got, []tenancy.Order{{TenantID: "a", OrderID: "o-1", TotalCents: 100}})
	got, err = tenancy.Orders(ctx, s.app, "b")
	is.NoErr(err)
	is.Equal(got, []tenancy.Order{{TenantID: "b", OrderID: "o-2", TotalCents: 200}})

	err = pgx.BeginFunc(ctx, s.app, func(tx pgx.Tx) error {
		is.NoErr(inbox.ApplyScope(ctx, tx, inbox.Tenant("a")))
		var n int
		is.NoErr(tx.QueryRow(ctx, "SELECT count(*) FROM tenancy_orders WHERE tenant_id = 'b'").Scan(&n))
		is.Equal(n, 0)
		tag, err := tx.Exec(ctx, "UPDATE tenancy_orders SET total_cents = 0 WHERE tenant_id = 'b'")
		is.NoErr(err)
		is.Equal(tag.RowsAffected(), int64(0))
		is.NoErr(tx.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE scope_id = 'b'").Scan(&n))
		is.Equal(n, 0) // pginbox's own tables too
		_, err = tx.Exec(ctx, "INSERT INTO tenancy_orders VALUES ('b', 'o-9', 1)")
		return err
	})
	var pgErr *pgconn.PgError
	is.True(errors.As(err, &pgErr) && pgErr.Code == "42501") // the policy refuses b's row in a's transaction

	var n int
	is.NoErr(s.app.QueryRow(ctx, "SELECT count(*) FROM tenancy_orders").Scan(&n))
	is.Equal(n, 0) // no scope applied: nothing
	is.NoErr(s.owner.QueryRow(ctx, "SELECT total_cents FROM tenancy_orders WHERE tenant_id = 'b'").Scan(&n))
	is.Equal(n, 200)
}

package schema_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/matryer/is"
	"github.com/pressly/goose/v3"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

// openNoticed opens dsn for the migrator and collects the server's NOTICEs.
func openNoticed(t *testing.T, dsn string) (*sql.DB, func() []string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	return db, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), notices...)
	}
}

// v6Receipt inserts a receipt as a v6 deployment stored it, with its work
// row when status is not COMPLETED.
func v6Receipt(t *testing.T, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, tenant, msgID, status string, replayOf inbox.ID) inbox.ID {
	t.Helper()
	ctx := context.Background()
	id := inboxtype.New()
	kind := "tenant"
	if tenant == "" {
		kind = "global"
	}
	settled := map[string]string{"COMPLETED": "COMPLETED", "DEAD": "DEAD"}[status]
	if settled == "" {
		settled = "PENDING"
	}
	fp := inbox.Fingerprint("e", 1, []byte(`{"n":1}`))
	_, err := q.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version,
			fingerprint, payload, status, attempts, completed_at, replay_of)
		VALUES ($1, $2, $3, 's', 'c', $4, 'e', 1, $5, '{"n":1}', $6, 1, CASE WHEN $6 = 'COMPLETED' THEN now() END, $7)`,
		id, kind, tenant, msgID, fp[:], settled, replayOf)
	if err != nil {
		t.Fatal(err)
	}
	if status != "COMPLETED" {
		_, err = q.Exec(ctx, `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, status, max_attempts)
			VALUES ($1, $2, $3, 'c', $4, 10)`, id, kind, tenant, status)
		if err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// The v6 -> v7 upgrade keeps every row pginbox wrote, gives audit rows their
// receipt's scope, and removes (and reports) the rows only raw SQL could have
// written that the new keys refuse: work rows of another scope than their
// receipt's (a completed receipt one of them made DEAD is COMPLETED again),
// receipts replaying another scope's receipt, audit rows linking two
// scopes. Down to v6 and up again keep the data.
func TestV6UpgradeRemovesCrossScopeRows(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.EmptyDatabase(t)
	db, notices := openNoticed(t, dsn)
	_, pool := open(t, dsn)
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 6)
	is.NoErr(err)

	aDone := v6Receipt(t, pool, "a", "a-done", "COMPLETED", inbox.ID{})
	aDead := v6Receipt(t, pool, "a", "a-dead", "DEAD", inbox.ID{})
	aReplay := v6Receipt(t, pool, "a", "a-done", "PENDING", aDone)
	gPending := v6Receipt(t, pool, "", "g-pending", "PENDING", inbox.ID{})
	bDamaged := v6Receipt(t, pool, "b", "b-damaged", "COMPLETED", inbox.ID{})
	bDone := v6Receipt(t, pool, "b", "b-done", "COMPLETED", inbox.ID{})
	forgedReplay := v6Receipt(t, pool, "a", "b-done", "PENDING", bDone)
	v6Receipt(t, pool, "a", "b-done", "COMPLETED", forgedReplay) // a replay of the forged one
	for _, st := range []struct {
		sql  string
		args []any
	}{
		// What the attack leaves: a's work row made b's completed receipt DEAD.
		{`INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, status, attempts, max_attempts, last_error)
			VALUES ($1, 'tenant', 'a', 'c', 'DEAD', 1, 1, 'lease expired')`, []any{bDamaged}},
		{`UPDATE pginbox_receipts SET status = 'DEAD', last_error = 'lease expired' WHERE id = $1`, []any{bDamaged}},
		// One not claimed yet, and one with no receipt at all.
		{`INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts) VALUES ($1, 'tenant', 'a', 'c', 1)`, []any{bDone}},
		{`INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts) VALUES (gen_random_uuid(), 'tenant', 'a', 'c', 1)`, nil},
		{`INSERT INTO pginbox_audit (receipt_id, action, actor, reason, from_status, to_status, from_version, to_version, new_receipt_id) VALUES
			($1, 'requeue', 'ops', 'legit', 'DEAD', 'PENDING', 1, 2, NULL),
			($2, 'replay', 'ops', 'legit', 'COMPLETED', 'COMPLETED', 1, 2, $3),
			($2, 'replay', 'ops', 'forged', 'COMPLETED', 'COMPLETED', 1, 2, $4),
			($5, 'requeue', 'ops', 'forged', 'DEAD', 'PENDING', 1, 2, NULL)`, []any{aDead, aDone, aReplay, bDone, forgedReplay}},
		{`INSERT INTO pginbox_outbox (id, source, destination, event_type, schema_version, payload, scope_kind, scope_id)
			VALUES (gen_random_uuid(), 's', 'd', 'e', 1, '{}', 'tenant', 'a')`, nil},
	} {
		_, err = pool.Exec(ctx, st.sql, st.args...)
		is.NoErr(err)
	}

	applied, err := m.Up(ctx)
	is.NoErr(err)
	is.Equal(applied, versions(7, schema.Version))
	pool.Reset()
	got := strings.Join(notices(), "\n")
	for _, want := range []string{
		"removed 3 work row(s) whose scope differs from their receipt's (only raw SQL writes them); 1 completed receipt(s) they had made DEAD are COMPLETED again",
		"removed 2 receipt(s) whose replay_of names a receipt of another scope",
		"removed 1 audit row(s) linking a receipt of another scope",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("notices\n%s\nlack %q", got, want)
		}
	}

	ids := func(q string) string {
		rows, err := pool.Query(ctx, q)
		is.NoErr(err)
		list, err := pgx.CollectRows(rows, pgx.RowTo[string])
		is.NoErr(err)
		return strings.Join(list, " ")
	}
	is.Equal(ids("SELECT message_id || ':' || status FROM pginbox_receipts_live ORDER BY message_id, id"),
		"a-dead:DEAD a-done:COMPLETED a-done:PENDING b-damaged:COMPLETED b-done:COMPLETED g-pending:PENDING")
	is.Equal(ids("SELECT receipt_id::text FROM pginbox_work ORDER BY receipt_id"),
		strings.Join(sortedUUIDs(aDead, aReplay, gPending), " "))
	is.Equal(ids("SELECT reason || ':' || scope_kind || '/' || scope_id FROM pginbox_audit ORDER BY id"), "legit:tenant/a legit:tenant/a")
	is.Equal(ids("SELECT coalesce(receipt_id::text, 'none') || ':' || scope_id FROM pginbox_outbox"), "none:a")

	// The upgraded database works: a duplicate, a new accept, an admin change.
	c, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	defer c.Close()
	msg := inbox.Message{Identity: inbox.Identity{Scope: inbox.Tenant("a"), Source: "s", Consumer: "c", MessageID: "a-done"},
		EventType: "e", SchemaVersion: 1, Payload: json.RawMessage(`{"n":1}`)}
	res, err := c.Accept(ctx, msg)
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)
	is.Equal(res.ID, aDone)
	msg.MessageID = "a-new"
	res, err = c.Accept(ctx, msg)
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	is.NoErr(err)
	dead, err := admin.ForTenant("a").Get(ctx, aDead)
	is.NoErr(err)
	_, err = admin.ForTenant("a").Requeue(ctx, aDead, inbox.ChangeParams{ExpectedVersion: dead.Version, Actor: "ops", Reason: "after v7"})
	is.NoErr(err)

	// Down to v6 and up again keep every row.
	rolled, err := m.DownTo(ctx, 6)
	is.NoErr(err)
	is.Equal(rolled, versions(schema.Version, 7))
	var cols int
	is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE (table_name = 'pginbox_audit' AND column_name IN ('scope_kind', 'scope_id'))
		   OR (table_name = 'pginbox_outbox' AND column_name = 'receipt_id')`).Scan(&cols))
	is.Equal(cols, 0)
	is.Equal(ids("SELECT count(*)::text FROM pginbox_audit"), "3")
	applied, err = m.Up(ctx)
	is.NoErr(err)
	is.Equal(applied, versions(7, schema.Version))
	is.Equal(ids("SELECT count(*)::text FROM pginbox_receipts"), "7")
	is.Equal(ids("SELECT DISTINCT scope_kind || '/' || scope_id FROM pginbox_audit"), "tenant/a")
}

func sortedUUIDs(ids ...inbox.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.UUIDString()
	}
	slices.Sort(out)
	return out
}

// Once tenancy is enabled (FORCE), the tables' owner is held to the
// policies and a migration run as it would see no tenant's rows. The
// migrator refuses before it changes anything and says which role to use;
// the same files run by the goose CLI fail loudly instead of converting
// nothing (row_security off). With BYPASSRLS the owner migrates every row.
func TestMigrateRefusesARoleRowSecurityRestricts(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.EmptyDatabase(t)
	_, super := open(t, dsn)
	owner := "pginbox_t_owner_" + strings.ToLower(inboxtype.New().String())
	_, err := super.Exec(ctx, "CREATE ROLE "+owner+" LOGIN; GRANT CREATE ON SCHEMA public TO "+owner)
	is.NoErr(err)
	t.Cleanup(func() {
		_, _ = super.Exec(context.Background(), "DROP OWNED BY "+owner)
		_, _ = super.Exec(context.Background(), "DROP ROLE "+owner)
	})
	cfg, err := pgx.ParseConfig(dsn)
	is.NoErr(err)
	cfg.User = owner
	ownerDB := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { ownerDB.Close() })
	m := migrator(t, ownerDB)
	_, err = m.UpTo(ctx, 6)
	is.NoErr(err)
	ownerConn, err := pgx.ConnectConfig(ctx, cfg)
	is.NoErr(err)
	defer ownerConn.Close(ctx)
	id := v6Receipt(t, ownerConn, "a", "m", "DEAD", inbox.ID{})
	_, err = ownerConn.Exec(ctx, `INSERT INTO pginbox_audit (receipt_id, action, actor, reason, from_status, to_status, from_version, to_version)
		VALUES ($1, 'requeue', 'ops', 'r', 'DEAD', 'PENDING', 1, 2)`, id)
	is.NoErr(err)
	for _, table := range schema.TenancyTables { // what `inbox tenancy enable` did at v6
		_, err := ownerConn.Exec(ctx, "ALTER TABLE "+table+" ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY")
		is.NoErr(err)
	}

	_, err = m.Up(ctx)
	is.True(errors.Is(err, schema.ErrMigrateRestricted))
	is.True(strings.Contains(err.Error(), "ALTER ROLE "+owner+" BYPASSRLS"))
	cur, err := m.Current(ctx)
	is.NoErr(err)
	is.Equal(cur, int64(6))

	// The goose CLI has no such check: the migration itself refuses.
	p, err := goose.NewProvider(goose.DialectPostgres, ownerDB, schema.FS(), goose.WithTableName(schema.VersionTable))
	is.NoErr(err)
	_, err = p.Up(ctx)
	is.True(err != nil && strings.Contains(err.Error(), "query would be affected by row-level security policy"))
	cur, err = m.Current(ctx)
	is.NoErr(err)
	is.Equal(cur, int64(6))

	_, err = super.Exec(ctx, "ALTER ROLE "+owner+" BYPASSRLS")
	is.NoErr(err)
	applied, err := m.Up(ctx)
	is.NoErr(err)
	is.Equal(applied, versions(7, schema.Version))
	var scope string
	is.NoErr(super.QueryRow(ctx, "SELECT scope_kind || '/' || scope_id FROM pginbox_audit WHERE receipt_id = $1", id).Scan(&scope))
	is.Equal(scope, "tenant/a")
}

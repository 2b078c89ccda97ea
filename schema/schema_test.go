package schema_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

func open(t *testing.T, dsn string) (*sql.DB, *pgxpool.Pool) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return db, pool
}

// versions lists the schema versions from from to to, either way: what a
// migration up or down steps through.
func versions(from, to int64) []int64 {
	var out []int64
	step := int64(1)
	if to < from {
		step = -1
	}
	for v := from; ; v += step {
		out = append(out, v)
		if v == to {
			return out
		}
	}
}

func migrator(t *testing.T, db *sql.DB) *schema.Migrator {
	t.Helper()
	m, err := schema.NewMigrator(db)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCheckNamesExpectedAndFoundVersion(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))

	err := schema.Check(ctx, pool)
	var verr *schema.VersionError
	is.True(errors.As(err, &verr))
	is.Equal(verr.Expected, schema.Version)
	is.Equal(verr.Found, int64(0))
	is.True(errors.Is(err, schema.ErrNotMigrated))
	is.True(strings.Contains(err.Error(), "run `inbox migrate up`"))

	m := migrator(t, db)
	_, err = m.UpTo(ctx, 1)
	is.NoErr(err)
	err = schema.Check(ctx, pool)
	is.True(errors.As(err, &verr))
	is.Equal(verr.Found, int64(1))
	is.True(strings.Contains(err.Error(), fmt.Sprintf("expected version %d, found 1", schema.Version)))

	_, err = m.Up(ctx)
	is.NoErr(err)
	is.NoErr(schema.Check(ctx, pool))

	// Check never creates anything: the empty database is still empty.
	_, pool2 := open(t, inboxtest.EmptyDatabase(t))
	_ = schema.Check(ctx, pool2)
	var tables int
	is.NoErr(pool2.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables))
	is.Equal(tables, 0)
}

func TestV1ReceiptsStillDeduplicateAfterUpgrade(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.EmptyDatabase(t)
	db, pool := open(t, dsn)
	m := migrator(t, db)

	// The application's own goose history must never be touched.
	_, err := pool.Exec(ctx, `CREATE TABLE goose_db_version (id serial PRIMARY KEY, version_id bigint NOT NULL, is_applied boolean NOT NULL, tstamp timestamp DEFAULT now());
		INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true), (20240101, true)`)
	is.NoErr(err)

	applied, err := m.UpTo(ctx, 1)
	is.NoErr(err)
	is.Equal(applied, []int64{1})

	// A receipt written by a v1-era deployment, with the fingerprint it computed.
	canon := []byte(`{"orderId":"o-1","total":10}`)
	fp := inbox.Fingerprint("order.created", 1, canon)
	v1ID := inboxtype.New()
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, source, consumer, message_id, event_type, schema_version, fingerprint, payload, status, attempts)
		VALUES ($1, 'orders-service', 'orders.projection.v1', 'evt-v1', 'order.created', 1, $2, $3, 'COMPLETED', 1)`,
		v1ID, fp[:], canon)
	is.NoErr(err)

	applied, err = m.Up(ctx)
	is.NoErr(err)
	is.Equal(applied, versions(2, schema.Version))

	c, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	msg := inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Global(), Source: "orders-service", Consumer: "orders.projection.v1", MessageID: "evt-v1"},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       json.RawMessage(`{"total":10, "orderId":"o-1"}`),
	}
	res, err := c.Accept(ctx, msg)
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)
	is.Equal(res.ID, v1ID)
	is.Equal(res.Status, inbox.StatusCompleted)

	msg.Payload = json.RawMessage(`{"total":11,"orderId":"o-1"}`)
	_, err = c.Accept(ctx, msg)
	is.True(errors.Is(err, inbox.ErrIdentityConflict))

	var version int64
	var kind string
	is.NoErr(pool.QueryRow(ctx, "SELECT version, scope_kind FROM pginbox_receipts WHERE id = $1", v1ID).Scan(&version, &kind))
	is.Equal(version, int64(1))
	is.Equal(kind, "global")

	// Down to v1 keeps the row (v1 can represent it), then up again.
	rolled, err := m.DownTo(ctx, 1)
	is.NoErr(err)
	is.Equal(rolled, versions(schema.Version, 2))
	var n int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE id = $1 AND message_id = 'evt-v1'", v1ID).Scan(&n))
	is.Equal(n, 1)
	_, err = m.Up(ctx)
	is.NoErr(err)
	pool.Reset() // cached plans refer to the old table shape
	res, err = c.Accept(ctx, inbox.Message{
		Identity:      msg.Identity,
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       json.RawMessage(canon),
	})
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)

	// A tenant receipt cannot be represented in v1: down refuses and changes nothing.
	_, err = c.Accept(ctx, inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant("t1"), Source: "s", Consumer: "c", MessageID: "m"},
		EventType:     "e",
		SchemaVersion: 1,
		Payload:       json.RawMessage(`{}`),
	})
	is.NoErr(err)
	_, err = m.DownTo(ctx, 1)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "cannot migrate down to schema v1"))
	cur, err := m.Current(ctx)
	is.NoErr(err)
	is.Equal(cur, schema.Version) // refused before any step
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts").Scan(&n))
	is.Equal(n, 2)

	// All the way down removes pginbox's tables but not the application's history.
	_, err = pool.Exec(ctx, "DELETE FROM pginbox_work WHERE scope_kind = 'tenant'; DELETE FROM pginbox_receipts WHERE scope_kind = 'tenant'")
	is.NoErr(err)
	_, err = m.DownTo(ctx, 0)
	is.NoErr(err)
	var exists bool
	is.NoErr(pool.QueryRow(ctx, "SELECT to_regclass('pginbox_receipts') IS NOT NULL").Scan(&exists))
	is.True(!exists)
	var appVersions []int64
	rows, err := pool.Query(ctx, "SELECT version_id FROM goose_db_version ORDER BY id")
	is.NoErr(err)
	appVersions, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	is.NoErr(err)
	is.Equal(appVersions, []int64{0, 20240101})
}

func TestConcurrentUpIsSerialized(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.EmptyDatabase(t)

	const migrators = 3
	var wg sync.WaitGroup
	results := make([][]int64, migrators)
	errs := make([]error, migrators)
	for i := range migrators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			m, err := schema.NewMigrator(db)
			if err != nil {
				errs[i] = err
				return
			}
			results[i], errs[i] = m.Up(ctx)
		}()
	}
	wg.Wait()
	var all []int64
	for i := range migrators {
		is.NoErr(errs[i])
		all = append(all, results[i]...)
	}
	// Each migration ran exactly once across all migrators.
	is.Equal(len(all), int(schema.Version))
	_, pool := open(t, dsn)
	var applied int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM "+schema.VersionTable+" WHERE version_id > 0").Scan(&applied))
	is.Equal(applied, int(schema.Version))
	is.NoErr(schema.Check(ctx, pool))
}

func TestStatusListsMigrations(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _ := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 1)
	is.NoErr(err)
	st, err := m.Status(ctx)
	is.NoErr(err)
	is.Equal(len(st), int(schema.Version))
	is.Equal(st[0].Version, int64(1))
	is.True(st[0].Applied)
	is.Equal(st[1].Version, int64(2))
	is.True(!st[1].Applied)
	is.True(strings.HasPrefix(st[1].Source, "00002_"))
}

// Receipts written under v2 (payload stored as jsonb) keep deduplicating after
// v3 stores payloads as their canonical text, and a v3 accept stores exactly
// the canonical JSON.
func TestV2ReceiptsStillDeduplicateAfterPayloadText(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 2)
	is.NoErr(err)

	c, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	defer c.Close()
	msg := inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Tenant("t1"), Source: "s", Consumer: "c", MessageID: "v2-era"},
		EventType:     "e",
		SchemaVersion: 1,
		Payload:       json.RawMessage(`{"b":[1.50,2e2],"aa":1}`),
	}
	canon := []byte(`{"aa":1,"b":[1.5,200]}`)
	fp := inbox.Fingerprint("e", 1, canon)
	v2ID := inboxtype.New()
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, fingerprint, payload)
		VALUES ($1, 'tenant', 't1', 's', 'c', 'v2-era', 'e', 1, $2, $3::text::jsonb)`, v2ID, fp[:], string(canon))
	is.NoErr(err)

	applied, err := m.Up(ctx)
	is.NoErr(err)
	is.Equal(applied, versions(3, schema.Version))
	pool.Reset() // cached plans refer to the old column type
	res, err := c.Accept(ctx, msg)
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)
	is.Equal(res.ID, v2ID)
	msg.Payload = json.RawMessage(`{"aa":2}`)
	_, err = c.Accept(ctx, msg)
	is.True(errors.Is(err, inbox.ErrIdentityConflict))

	// A new receipt stores the canonical text byte for byte.
	msg.MessageID = "v3-era"
	msg.Payload = json.RawMessage(`{"b":[1.50,2e2],"aa":1}`)
	res, err = c.Accept(ctx, msg)
	is.NoErr(err)
	var stored string
	is.NoErr(pool.QueryRow(ctx, "SELECT payload::text FROM pginbox_receipts WHERE id = $1", res.ID).Scan(&stored))
	is.Equal(stored, string(canon))

	// Down to v2 converts back to jsonb and keeps every row.
	rolled, err := m.DownTo(ctx, 2)
	is.NoErr(err)
	is.Equal(rolled, versions(schema.Version, 3))
	var n int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE payload = $1::jsonb", string(canon)).Scan(&n))
	is.Equal(n, 2)
}

// Down to v1 drops the audit table, so it refuses while admin actions are
// recorded there, and changes nothing.
func TestDownToV1RefusesWithAuditRows(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.Up(ctx)
	is.NoErr(err)
	id := inboxtype.New()
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, fingerprint, payload, status)
		VALUES ($1, 'global', '', 's', 'c', 'm', 'e', 1, $2, '{}', 'PENDING')`, id, make([]byte, 32))
	is.NoErr(err)
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_audit (receipt_id, scope_kind, scope_id, action, actor, reason, from_status, to_status, from_version, to_version)
		VALUES ($1, 'global', '', 'requeue', 'ops', 'test', 'DEAD', 'PENDING', 1, 2)`, id)
	is.NoErr(err)

	_, err = m.DownTo(ctx, 1)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "the audit trail holds admin actions"))
	cur, err := m.Current(ctx)
	is.NoErr(err)
	is.Equal(cur, schema.Version) // refused before any step
	var n int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_audit").Scan(&n))
	is.Equal(n, 1)

	_, err = pool.Exec(ctx, "DELETE FROM pginbox_audit")
	is.NoErr(err)
	_, err = m.DownTo(ctx, 1)
	is.NoErr(err)
}

// Schema v4 moves the queue state of active receipts into pginbox_work: every
// state survives the migration both ways, a redelivery is still a Duplicate
// with its live status, and the moved receipts can be processed.
func TestV3QueueStateMovesToTheWorkTable(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 3)
	is.NoErr(err)
	states := []string{"PENDING", "PROCESSING", "RETRYABLE", "DEAD", "COMPLETED"}
	for i, st := range states {
		canon := fmt.Sprintf(`{"n":%d}`, i)
		fp := inbox.Fingerprint("e", 1, []byte(canon))
		_, err := pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
			event_type, schema_version, fingerprint, payload, status, attempts, version, last_error, claim_token, lease_expires_at, completed_at)
			VALUES ($1, 'tenant', 't1', 's', 'c', $2, 'e', 1, $3, $4, $2, 2, 7, 'boom',
				CASE WHEN $2 = 'PROCESSING' THEN gen_random_uuid() END,
				CASE WHEN $2 = 'PROCESSING' THEN now() - interval '1 minute' END,
				CASE WHEN $2 = 'COMPLETED' THEN now() END)`, inboxtype.New(), st, fp[:], canon)
		is.NoErr(err)
	}
	snapshot := func() string {
		var s string
		is.NoErr(pool.QueryRow(ctx, `SELECT string_agg(message_id || ':' || status || ':' || attempts || ':' || version || ':' || coalesce(last_error, '-'), ' ' ORDER BY message_id)
			FROM pginbox_receipts_live`).Scan(&s))
		return s
	}
	_, err = m.Up(ctx)
	is.NoErr(err)
	pool.Reset()
	want := "COMPLETED:COMPLETED:2:7:boom DEAD:DEAD:2:7:boom PENDING:PENDING:2:7:boom PROCESSING:PROCESSING:2:7:boom RETRYABLE:RETRYABLE:2:7:boom"
	is.Equal(snapshot(), want)
	var queued int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_work").Scan(&queued))
	is.Equal(queued, 4) // every state but COMPLETED

	c, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	defer c.Close()
	for i, st := range states {
		res, err := c.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant("t1"), Source: "s", Consumer: "c", MessageID: st},
			EventType: "e", SchemaVersion: 1, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
		})
		is.NoErr(err)
		is.Equal(res.Outcome, inbox.Duplicate)
		is.Equal(string(res.Status), st)
	}

	// Down to v3 puts the queue state back on the receipts.
	rolled, err := m.DownTo(ctx, 3)
	is.NoErr(err)
	is.Equal(rolled, versions(schema.Version, 4))
	var back string
	is.NoErr(pool.QueryRow(ctx, `SELECT string_agg(message_id || ':' || status || ':' || attempts || ':' || version || ':' || coalesce(last_error, '-'), ' ' ORDER BY message_id)
		FROM pginbox_receipts`).Scan(&back))
	is.Equal(back, want)
	var claimed int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE claim_token IS NOT NULL AND status = 'PROCESSING'").Scan(&claimed))
	is.Equal(claimed, 1)
}

// Rolling the outbox migration back drops the outbox, so it refuses while events wait there to be
// published (or sit DEAD), and changes nothing; published history alone does
// not stop it.
func TestOutboxDownRefusesUnpublishedEvents(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.Up(ctx)
	is.NoErr(err)
	for _, status := range []string{"PUBLISHED", "DEAD"} {
		published := "NULL"
		if status == "PUBLISHED" {
			published = "now()"
		}
		_, err = pool.Exec(ctx, `INSERT INTO pginbox_outbox (id, source, destination, event_type, schema_version, payload, status, published_at)
			VALUES ($1, 's', 'd', 'e', 1, '{}', $2, `+published+`)`, inboxtype.New(), status)
		is.NoErr(err)
	}

	_, err = m.DownTo(ctx, 4)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "cannot roll back the outbox migration: the outbox holds events that were never published"))
	var pgErr *pgconn.PgError
	is.True(errors.As(err, &pgErr))
	is.True(strings.Contains(pgErr.Hint, "inbox outbox stats"))
	cur, err := m.Current(ctx)
	is.NoErr(err)
	is.Equal(cur, schema.Version) // refused before any step

	_, err = pool.Exec(ctx, "DELETE FROM pginbox_outbox WHERE status = 'DEAD'")
	is.NoErr(err)
	rolled, err := m.DownTo(ctx, 4)
	is.NoErr(err)
	is.Equal(rolled, versions(schema.Version, 5))
	var exists bool
	is.NoErr(pool.QueryRow(ctx, "SELECT to_regclass('pginbox_outbox') IS NOT NULL").Scan(&exists))
	is.True(!exists)
}

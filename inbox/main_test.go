package inbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

// newPool returns a pool on a fresh migrated database, closed at test end.
func newPool(t testing.TB, configure ...func(*pgxpool.Config)) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := inboxtest.Database(t)
	return poolFor(t, dsn, configure...), dsn
}

// layouts are the database layouts a behaviour that must not depend on
// one is checked on: one server, and Citus (a coordinator and worker nodes;
// its tests skip where Citus is not installed, outside CI).
var layouts = []struct {
	name     string
	database func(testing.TB) string
}{{"postgres", inboxtest.Database}, {"citus", inboxtest.CitusDatabase}}

// onEachLayout runs body as a parallel subtest per layout, each on a pool of
// a fresh migrated database of its own.
func onEachLayout(t *testing.T, body func(t *testing.T, pool *pgxpool.Pool), configure ...func(*pgxpool.Config)) {
	t.Helper()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			body(t, poolFor(t, l.database(t), configure...))
		})
	}
}

func poolFor(t testing.TB, dsn string, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 20
	for _, f := range configure {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newClient(t testing.TB, pool *pgxpool.Pool, cfg inbox.Config) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // before the pool closes: cleanups run last-in first-out
	return c
}

func countRows(t testing.TB, pool *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts_live WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func orderMsg(id string, payload any) inbox.Message {
	return inbox.Message{
		Identity: inbox.Identity{
			Scope:     inbox.Tenant("tenant-a"),
			Source:    "orders-service",
			Consumer:  "orders.projection.v1",
			MessageID: id,
		},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       payload,
	}
}

// rowSnapshot is the full stored row as text, to prove it did not change.
func rowSnapshot(t testing.TB, pool *pgxpool.Pool, id inbox.ID) string {
	t.Helper()
	var s string
	err := pool.QueryRow(context.Background(), "SELECT to_jsonb(r)::text FROM pginbox_receipts_live r WHERE id = $1", id).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// raw marks a string as JSON text (a plain string payload is a JSON string).
func raw(s string) json.RawMessage { return json.RawMessage(s) }

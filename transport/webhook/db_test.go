package webhook_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// The only place this package's tests touch the test kit.

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

// testDSN is a fresh migrated database for t.
func testDSN(t testing.TB) string { return inboxtest.Database(t) }

// testPool is a pool on dsn, closed at test end.
func testPool(t testing.TB, dsn string, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

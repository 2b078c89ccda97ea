package mqtt_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/pgtest"
	"github.com/pginbox/pginbox/schema"
)

// The test kit's calls live here only, so switching kits touches one file.

func TestMain(m *testing.M) {
	pgtest.SetMigrate(schema.UpDSN)
	pgtest.Main(m)
}

// testDSN is a fresh migrated database private to the test.
func testDSN(t testing.TB) string { return pgtest.DB(t) }

// exampleDSN is testDSN for runnable examples.
func exampleDSN() (string, func()) {
	dsn, drop, err := pgtest.NewDatabase(context.Background())
	if err != nil {
		panic(err)
	}
	return dsn, drop
}

// newPool is a pool on dsn, closed when the test ends.
func newPool(t testing.TB, dsn string, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 16
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

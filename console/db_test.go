package console_test

// The test kit's calls live in this file only, so switching kits touches one
// file.

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

// newPool returns a pool on a fresh migrated database of the test's own.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), inboxtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newEmptyPool returns a pool on a fresh database without pginbox's schema.
func newEmptyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), inboxtest.EmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// examplePool is newPool for runnable examples, which have no *testing.T.
func examplePool() (pool *pgxpool.Pool, done func()) {
	dsn, drop, err := inboxtest.NewDatabase(context.Background())
	if err != nil {
		panic(err)
	}
	pool, err = pgxpool.New(context.Background(), dsn)
	if err != nil {
		panic(err)
	}
	return pool, func() { pool.Close(); drop() }
}

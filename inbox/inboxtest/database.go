package inboxtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvDatabaseURL names the environment variable that points tests at an
// existing server instead of a throwaway cluster. Its value is a connection
// string (URL or keyword/value) for a maintenance database on that server,
// for example postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable.
// Its role needs CREATEDB.
const EnvDatabaseURL = "INBOX_TEST_DATABASE_URL"

// DefaultPoolMaxConns is the MaxConns of a [Pool]: enough for a worker with
// the default Concurrency (10 handlers, a listener and a claimer) beside the
// test's own queries.
const DefaultPoolMaxConns = 20

// MigrateFunc brings the database at dsn to the application's schema. It runs
// once per test binary, on the template database, after pginbox's schema.
type MigrateFunc func(ctx context.Context, dsn string) error

var (
	migrateMu sync.Mutex
	migrate   MigrateFunc
	tmplFixed bool // the template was built; SetMigrate can no longer change it

	mainUsed atomic.Bool
	hintOnce sync.Once
)

// SetMigrate registers the application's migrations: fn runs on the template
// database after pginbox's schema is applied, once per test binary, so every
// [Database] has both. Call it in TestMain before [Main]. It panics once the
// template has been built, since databases cloned before would lack fn's
// changes.
func SetMigrate(fn MigrateFunc) {
	migrateMu.Lock()
	defer migrateMu.Unlock()
	if tmplFixed {
		panic("inboxtest: SetMigrate called after the template database was built; call it in TestMain before inboxtest.Main")
	}
	migrate = fn
}

// Main runs the tests, then releases what the kit set up: it stops the
// throwaway clusters (the plain one and the Citus one), and in
// INBOX_TEST_DATABASE_URL mode drops the template database. It does this whether or not the tests pass. Then it calls os.Exit
// with m.Run's code. Use it as the whole TestMain, after any SetMigrate:
//
//	func TestMain(m *testing.M) { inboxtest.Main(m) }
func Main(m *testing.M) {
	mainUsed.Store(true)
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "inboxtest: cleanup after tests: %v\n", err)
	}
	os.Exit(code)
}

// Database returns a connection string for a new database private to the
// test, with pginbox's schema and the [SetMigrate] function's changes applied
// and no rows in pginbox's tables. The database is a clone of a template
// migrated once per test binary, which takes milliseconds. It is dropped WITH
// (FORCE) when the test ends, so connections still open then are terminated;
// a failed drop is only logged. If the database can't be provided, the test
// fails.
//
// If the test binary's TestMain doesn't call [Main], Database still works. It
// prints a hint, and the cluster dies with the test process instead (on Linux
// through a parent-death signal); the next test run removes its directory. In
// INBOX_TEST_DATABASE_URL mode the template database is then left on the
// server.
func Database(t testing.TB) string {
	t.Helper()
	e := envFor(t)
	tmpl, err := e.template()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return e.createForTest(t, tmpl)
}

// EmptyDatabase is like [Database] but the database has no schema at all (a
// clone of template0). Use it to test migrations.
func EmptyDatabase(t testing.TB) string {
	t.Helper()
	return envFor(t).createForTest(t, "")
}

// Pool returns a pool on a new [Database], closed when the test ends. Its
// MaxConns is [DefaultPoolMaxConns]; the configure functions run after that,
// in order, and may change anything.
func Pool(t testing.TB, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(Database(t))
	if err != nil {
		t.Fatalf("inboxtest.Pool: %v", err)
	}
	cfg.MaxConns = DefaultPoolMaxConns
	for _, f := range configure {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("inboxtest.Pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewDatabase is [Database] for code without a testing.TB, such as runnable
// examples: a new database with the same schema, and a function that drops
// it. Close every connection to it before calling drop on a server older than
// PostgreSQL 13, which cannot drop a database in use.
func NewDatabase(ctx context.Context) (dsn string, drop func(), err error) {
	e, err := shared()
	if err != nil {
		return "", nil, err
	}
	tmpl, err := e.template()
	if err != nil {
		return "", nil, err
	}
	name := databaseName("example")
	if err := e.createDatabase(ctx, name, tmpl); err != nil {
		return "", nil, err
	}
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.dropDatabase(ctx, name); err != nil {
			fmt.Fprintf(os.Stderr, "inboxtest: dropping database %s: %v\n", name, err)
		}
	}
	return e.dsnFor(name), drop, nil
}

// createForTest creates a database from template ("" means template0) that
// is dropped when t ends.
func (e *env) createForTest(t testing.TB, template string) string {
	t.Helper()
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.createDatabase(ctx, name, template); err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.dropDatabase(ctx, name); err != nil {
			t.Logf("inboxtest: dropping test database %s: %v", name, err)
		}
	})
	return e.dsnFor(name)
}

func envFor(t testing.TB) *env {
	t.Helper()
	e, err := shared()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return e
}

package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnvDatabaseURL names the environment variable that points tests at an
// existing server instead of an ephemeral cluster. Its value is a
// connection string (URL or keyword/value) for a maintenance database on
// that server, e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable.
// Its role needs CREATEDB.
const EnvDatabaseURL = "INBOX_TEST_DATABASE_URL"

// MigrateFunc brings the database at dsn to the current schema.
type MigrateFunc func(ctx context.Context, dsn string) error

var (
	migrateMu sync.Mutex
	migrate   MigrateFunc
	tmplFixed bool // the template was built; SetMigrate can no longer change it

	mainUsed atomic.Bool
	hintOnce sync.Once

	envOnce sync.Once
	envVal  *testEnv
	envErr  error

	tmplOnce sync.Once
	tmplName string // "" when there is no migrate function
	tmplErr  error
)

// SetMigrate registers the function that DB uses to migrate its template
// database (once per test binary). Call it before the first DB call,
// typically in TestMain before [Main]. Without it, DB returns empty
// databases. It panics once the template has been built.
func SetMigrate(fn MigrateFunc) {
	migrateMu.Lock()
	defer migrateMu.Unlock()
	if tmplFixed {
		panic("pgtest: SetMigrate called after the template database was built; call it in TestMain before pgtest.Main")
	}
	migrate = fn
}

// Main runs the tests, then releases what the package set up: it stops the
// shared cluster, or in INBOX_TEST_DATABASE_URL mode drops the template
// database. It does this whether or not the tests pass. Then it calls os.Exit
// with m.Run's code. Use it as the whole TestMain, after any SetMigrate:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	mainUsed.Store(true)
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: cleanup after tests: %v\n", err)
	}
	os.Exit(code)
}

// DB returns a connection string for a new database private to the test,
// in the state the SetMigrate function left its template (normally the
// current schema and no rows). The database is a clone of a template
// migrated once per test binary. It is dropped WITH (FORCE) when the test
// ends, so connections still open then are terminated; a failed drop is only
// logged. If the database can't be provided, the test fails (t.Fatal).
//
// If the test binary's TestMain doesn't call Main, DB still works. It logs a
// hint, and the cluster is not stopped by Main. It dies with the test
// process instead (on Linux via the parent-death signal), and the next
// cluster start sweeps away its directory. In INBOX_TEST_DATABASE_URL mode
// the template database is then left on the server.
func DB(t testing.TB) string {
	t.Helper()
	e := testEnvFor(t)
	tmpl, err := template(e)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return e.createTestDB(t, tmpl)
}

// EmptyDB is like DB but the database has no schema at all (a clone of
// template0). Use it for migration tests.
func EmptyDB(t testing.TB) string {
	t.Helper()
	return testEnvFor(t).createTestDB(t, "")
}

// testEnv is where test databases are created: the shared cluster or the
// INBOX_TEST_DATABASE_URL server.
type testEnv struct {
	cluster  *Cluster // nil in external mode
	adminDSN string
	dsnFor   func(dbname string) string

	// Server capabilities, by server_version_num.
	fileCopy  bool // CREATE DATABASE ... STRATEGY FILE_COPY (15+)
	dropForce bool // DROP DATABASE ... WITH (FORCE) (13+)

	mu   sync.Mutex
	idle []*pgx.Conn // admin connections to reuse
}

func testEnvFor(t testing.TB) *testEnv {
	t.Helper()
	e, err := sharedEnv()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return e
}

func sharedEnv() (*testEnv, error) {
	if !mainUsed.Load() {
		hintOnce.Do(func() {
			fmt.Fprintln(os.Stderr, "pgtest: hint: add `func TestMain(m *testing.M) { pgtest.Main(m) }` to this package's tests. Without it the shared "+
				"cluster is only stopped when the test process exits, and its directory is removed by a later run. In "+
				EnvDatabaseURL+" mode, the template database is left on the server")
		})
	}
	envOnce.Do(func() { envVal, envErr = newTestEnv(context.Background()) })
	return envVal, envErr
}

// NewDatabase is DB for code without a testing.TB, such as runnable examples:
// a fresh migrated database on the shared test environment, and a function
// that drops it.
func NewDatabase(ctx context.Context) (dsn string, drop func(), err error) {
	e, err := sharedEnv()
	if err != nil {
		return "", nil, err
	}
	tmpl, err := template(e)
	if err != nil {
		return "", nil, err
	}
	name := testDBName("example")
	if err := e.createDatabase(ctx, name, tmpl); err != nil {
		return "", nil, err
	}
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.dropDatabase(ctx, name); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: dropping database %s: %v\n", name, err)
		}
	}
	return e.dsnFor(name), drop, nil
}

func newTestEnv(ctx context.Context) (*testEnv, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return newExternalEnv(ctx, u)
	}
	c, err := Start(ctx, Options{})
	if err != nil {
		return nil, err
	}
	e := &testEnv{cluster: c, adminDSN: c.ConnString("postgres"), dsnFor: c.ConnString}
	if err := e.probe(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return e, nil
}

// newExternalEnv sets up test databases on an existing server. It checks
// up front that the role may create databases, for a clear error.
func newExternalEnv(ctx context.Context, dsn string) (*testEnv, error) {
	dsnFor, err := dsnWithDatabase(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %s: %w", EnvDatabaseURL, err)
	}
	e := &testEnv{adminDSN: dsn, dsnFor: dsnFor}
	if err := e.probe(ctx); err != nil {
		return nil, err
	}
	conn, err := e.conn(ctx)
	if err != nil {
		return nil, err
	}
	var role string
	var canCreate bool
	err = conn.QueryRow(ctx, `SELECT current_user, rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user`).Scan(&role, &canCreate)
	e.release(conn, err)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %s: checking privileges: %w", EnvDatabaseURL, err)
	}
	if !canCreate {
		return nil, createPrivilegeError(role, nil)
	}
	return e, nil
}

func createPrivilegeError(role string, err error) error {
	msg := fmt.Sprintf("pgtest: %s: role %q may not create databases, and every test needs its own database; "+
		"grant it with `ALTER ROLE %s CREATEDB`, use a superuser, or unset %s to use a throwaway cluster",
		EnvDatabaseURL, role, pgx.Identifier{role}.Sanitize(), EnvDatabaseURL)
	if err != nil {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return errors.New(msg)
}

// dsnWithDatabase returns a function that rewrites dsn (URL or
// keyword/value form) to name another database.
func dsnWithDatabase(dsn string) (func(string) string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, fmt.Errorf("invalid URL: %w", err)
		}
		q := u.Query()
		q.Del("dbname") // would override the path
		u.RawQuery = q.Encode()
		return func(db string) string {
			v := *u
			v.Path = "/" + db
			v.RawPath = ""
			return v.String()
		}, nil
	}
	if _, err := pgconn.ParseConfig(dsn); err != nil {
		return nil, err
	}
	// In keyword/value strings a later keyword wins.
	return func(db string) string { return dsn + " dbname=" + quoteConnValue(db) }, nil
}

func (e *testEnv) probe(ctx context.Context) error {
	conn, err := e.conn(ctx)
	if err != nil {
		return err
	}
	var v int
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&v)
	e.release(conn, err)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	// FILE_COPY forces two checkpoints per CREATE DATABASE. On our own
	// fsync-off cluster they are nearly free, and copying files beats
	// WAL-logging every block. On a shared server they would disturb
	// everyone else, for no gain (measured). So only use it on our own.
	e.fileCopy = v >= 150000 && e.cluster != nil
	e.dropForce = v >= 130000
	return nil
}

// conn returns an admin connection (to the maintenance database). Hand it
// back with release.
func (e *testEnv) conn(ctx context.Context) (*pgx.Conn, error) {
	e.mu.Lock()
	if n := len(e.idle); n > 0 {
		c := e.idle[n-1]
		e.idle = e.idle[:n-1]
		e.mu.Unlock()
		return c, nil
	}
	e.mu.Unlock()
	c, err := pgx.Connect(ctx, e.adminDSN)
	if err != nil {
		where := "the test cluster"
		if e.cluster == nil {
			where = EnvDatabaseURL
		}
		return nil, fmt.Errorf("pgtest: connecting to %s: %w", where, err)
	}
	return c, nil
}

// release returns c to the idle list unless the last use failed.
func (e *testEnv) release(c *pgx.Conn, lastErr error) {
	if lastErr == nil && !c.IsClosed() {
		e.mu.Lock()
		if len(e.idle) < 8 {
			e.idle = append(e.idle, c)
			c = nil
		}
		e.mu.Unlock()
	}
	if c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx)
	}
}

func (e *testEnv) exec(ctx context.Context, sql string) error {
	c, err := e.conn(ctx)
	if err != nil {
		return err
	}
	_, err = c.Exec(ctx, sql)
	e.release(c, err)
	return err
}

func (e *testEnv) closeIdle() {
	e.mu.Lock()
	idle := e.idle
	e.idle = nil
	e.mu.Unlock()
	for _, c := range idle {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.Close(ctx)
		cancel()
	}
}

// createDatabase creates name as a copy of template ("" means template0).
func (e *testEnv) createDatabase(ctx context.Context, name, template string) error {
	if template == "" {
		template = "template0"
	}
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	if e.fileCopy {
		sql += " STRATEGY FILE_COPY"
	}
	err := e.exec(ctx, sql)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return createPrivilegeError(e.role(), err)
	}
	if err != nil {
		return fmt.Errorf("pgtest: creating database %s: %w", name, err)
	}
	return nil
}

func (e *testEnv) role() string {
	cfg, err := pgconn.ParseConfig(e.adminDSN)
	if err != nil {
		return "?"
	}
	return cfg.User
}

func (e *testEnv) dropDatabase(ctx context.Context, name string) error {
	sql := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize()
	if e.dropForce {
		sql += " WITH (FORCE)"
	}
	return e.exec(ctx, sql)
}

// template builds the template database once: create it, migrate it, and
// remember its name. Without a migrate function there is no template.
func template(e *testEnv) (string, error) {
	tmplOnce.Do(func() {
		migrateMu.Lock()
		fn := migrate
		tmplFixed = true
		migrateMu.Unlock()
		if fn == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		name := "pginbox_tmpl_" + randomHex(8)
		if err := e.createDatabase(ctx, name, ""); err != nil {
			tmplErr = err
			return
		}
		if err := fn(ctx, e.dsnFor(name)); err != nil {
			tmplErr = fmt.Errorf("pgtest: migrating template database %s: %w", name, err)
			e.dropDatabase(ctx, name)
			return
		}
		// Clones fail while anyone is connected to the template. Shut it
		// to new connections and end any the migrate function left open
		// (e.g. a pool it didn't close).
		if err := e.exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH ALLOW_CONNECTIONS false"); err != nil {
			tmplErr = fmt.Errorf("pgtest: closing template database %s: %w", name, err)
			return
		}
		if err := e.exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+name+"' AND pid <> pg_backend_pid()"); err != nil {
			tmplErr = fmt.Errorf("pgtest: closing template database %s: %w", name, err)
			return
		}
		tmplName = name
	})
	return tmplName, tmplErr
}

func (e *testEnv) createTestDB(t testing.TB, template string) string {
	t.Helper()
	name := testDBName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.createDatabase(ctx, name, template); err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.dropDatabase(ctx, name); err != nil {
			t.Logf("pgtest: dropping test database %s: %v", name, err)
		}
	})
	return e.dsnFor(name)
}

// testDBName makes a unique database name that still hints at the test:
// t_<sanitized test name>_<random>, within the 63-byte limit.
func testDBName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return "t_" + b.String() + "_" + randomHex(8)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// teardown releases the shared test environment, if it was set up.
func teardown() error {
	ran := false
	envOnce.Do(func() { // never set up; make later setups fail clearly
		ran = true
		envErr = errors.New("pgtest: DB called after pgtest.Main finished")
	})
	if ran || envVal == nil {
		return nil
	}
	e := envVal
	tmplOnce.Do(func() {}) // synchronize with (or forestall) template building
	var errs []error
	if e.cluster == nil {
		if tmplName != "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := e.dropDatabase(ctx, tmplName); err != nil {
				errs = append(errs, fmt.Errorf("dropping template database %s: %w", tmplName, err))
			}
			cancel()
		}
		e.closeIdle()
	} else {
		e.closeIdle()
		errs = append(errs, e.cluster.Stop())
	}
	return errors.Join(errs...)
}

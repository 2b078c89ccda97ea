package inboxtest

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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/internal/pgcluster"
)

// env is where test databases are created: a throwaway cluster shared by the
// test binary, or the INBOX_TEST_DATABASE_URL server.
type env struct {
	cluster  *pgcluster.Cluster // nil in external mode
	adminDSN string
	dsnFor   func(dbname string) string

	// Server capabilities, by server_version_num.
	fileCopy  bool // CREATE DATABASE ... STRATEGY FILE_COPY (15+)
	dropForce bool // DROP DATABASE ... WITH (FORCE) (13+)

	mu   sync.Mutex
	idle []*pgx.Conn // admin connections to reuse

	tmplOnce sync.Once
	tmplName string
	tmplErr  error
}

var (
	envOnce sync.Once
	envVal  *env
	envErr  error
)

// shared returns the test binary's environment, setting it up on first use.
func shared() (*env, error) {
	if !mainUsed.Load() {
		hintOnce.Do(func() {
			fmt.Fprintln(os.Stderr, "inboxtest: hint: add `func TestMain(m *testing.M) { inboxtest.Main(m) }` to this package's tests. Without it the "+
				"throwaway cluster is only stopped when the test process exits, and its directory is removed by a later run. In "+
				EnvDatabaseURL+" mode, the template database is left on the server")
		})
	}
	envOnce.Do(func() { envVal, envErr = newEnv(context.Background()) })
	return envVal, envErr
}

func newEnv(ctx context.Context) (*env, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return newExternalEnv(ctx, u)
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return nil, fmt.Errorf("inboxtest: starting a throwaway PostgreSQL (or set %s to use an existing server): %w", EnvDatabaseURL, err)
	}
	e := &env{cluster: c, adminDSN: c.ConnString("postgres"), dsnFor: c.ConnString}
	if err := e.probe(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return e, nil
}

// newExternalEnv sets up test databases on an existing server. It checks up
// front that the role may create databases, for a clear error.
func newExternalEnv(ctx context.Context, dsn string) (*env, error) {
	dsnFor, err := dsnWithDatabase(dsn)
	if err != nil {
		return nil, fmt.Errorf("inboxtest: %s is not a connection string (%w); use a URL such as postgres://user@host:5432/postgres", EnvDatabaseURL, err)
	}
	e := &env{adminDSN: dsn, dsnFor: dsnFor}
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
		return nil, fmt.Errorf("inboxtest: %s: checking privileges: %w", EnvDatabaseURL, err)
	}
	if !canCreate {
		return nil, createPrivilegeError(role, nil)
	}
	return e, nil
}

func createPrivilegeError(role string, err error) error {
	msg := fmt.Sprintf("inboxtest: %s: role %q may not create databases, and every test needs its own database; "+
		"grant it with `ALTER ROLE %s CREATEDB`, use a superuser, or unset %s to use a throwaway cluster",
		EnvDatabaseURL, role, pgx.Identifier{role}.Sanitize(), EnvDatabaseURL)
	if err != nil {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return errors.New(msg)
}

// dsnWithDatabase returns a function that rewrites dsn (URL or keyword/value
// form) to name another database. Names are the kit's own: [a-z0-9_] only.
func dsnWithDatabase(dsn string) (func(string) string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, err
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
	return func(db string) string { return dsn + " dbname=" + db }, nil
}

func (e *env) probe(ctx context.Context) error {
	conn, err := e.conn(ctx)
	if err != nil {
		return err
	}
	var v int
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&v)
	e.release(conn, err)
	if err != nil {
		return fmt.Errorf("inboxtest: %w", err)
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
func (e *env) conn(ctx context.Context) (*pgx.Conn, error) {
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
		if e.cluster != nil {
			return nil, fmt.Errorf("inboxtest: connecting to the throwaway cluster (server log %s): %w", e.cluster.LogPath(), err)
		}
		return nil, fmt.Errorf("inboxtest: connecting to %s: %w; start that server, fix the variable, or unset it to use a throwaway cluster", EnvDatabaseURL, err)
	}
	return c, nil
}

// release returns c to the idle list unless the last use failed.
func (e *env) release(c *pgx.Conn, lastErr error) {
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

func (e *env) exec(ctx context.Context, sql string, args ...any) error {
	c, err := e.conn(ctx)
	if err != nil {
		return err
	}
	_, err = c.Exec(ctx, sql, args...)
	e.release(c, err)
	return err
}

func (e *env) closeIdle() {
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
func (e *env) createDatabase(ctx context.Context, name, template string) error {
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
		return fmt.Errorf("inboxtest: creating database %s: %w", name, err)
	}
	return nil
}

func (e *env) role() string {
	cfg, err := pgconn.ParseConfig(e.adminDSN)
	if err != nil {
		return "?"
	}
	return cfg.User
}

func (e *env) dropDatabase(ctx context.Context, name string) error {
	sql := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize()
	if e.dropForce {
		sql += " WITH (FORCE)"
	}
	return e.exec(ctx, sql)
}

// databaseName makes a unique database name that still hints at the test:
// t_<sanitized test name>_<random>, within the 63-byte limit.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return "t_" + b.String() + "_" + randomHex(8)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// teardown releases the shared environments, if they were set up.
func teardown() error {
	return errors.Join(teardownPlain(), teardownCitus())
}

func teardownPlain() error {
	ran := false
	envOnce.Do(func() { // never set up; make later setups fail clearly
		ran = true
		envErr = errors.New("inboxtest: a database was requested after inboxtest.Main finished")
	})
	if ran || envVal == nil {
		return nil
	}
	e := envVal
	e.tmplOnce.Do(func() {}) // synchronize with (or forestall) template building
	var errs []error
	if e.cluster == nil {
		if e.tmplName != "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := e.dropDatabase(ctx, e.tmplName); err != nil {
				errs = append(errs, fmt.Errorf("dropping template database %s: %w", e.tmplName, err))
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

package pgtest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/internal/pgtest"
)

// migrateCalls counts runs of the migrate function registered in TestMain.
var migrateCalls atomic.Int32

// Environment variables for re-running this test binary as a helper process.
const (
	envHelper = "PGTEST_TEST_HELPER" // "orphan": start a cluster, print it, wait to be killed
	envReport = "PGTEST_TEST_REPORT" // file to which tests append the database names they used
)

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) == "orphan" {
		orphanHelper()
		return
	}
	pgtest.SetMigrate(func(ctx context.Context, dsn string) error {
		migrateCalls.Add(1)
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `
			CREATE TABLE widgets (id bigint PRIMARY KEY, name text NOT NULL);
			CREATE TABLE schema_version (version int NOT NULL);
			INSERT INTO schema_version VALUES (7);`)
		return err
	})
	pgtest.Main(m)
}

// orphanHelper starts a cluster, reports it on stdout and blocks until the
// parent kills this process.
func orphanHelper() {
	c, err := pgtest.Start(context.Background(), pgtest.Options{})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Printf("CLUSTER %d %s\n", c.Pid(), c.Dir())
	select {}
}

func externalMode() bool { return os.Getenv(pgtest.EnvDatabaseURL) != "" }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %q: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func queryString(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(t.Context(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// report appends the current database's name to the report file, when the
// test runs as the external-mode child of TestExternalMode.
func report(t *testing.T, conn *pgx.Conn, extra ...string) {
	path := os.Getenv(envReport)
	if path == "" {
		return
	}
	names := append([]string{queryString(t, conn, "SELECT current_database()")}, extra...)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range names {
		fmt.Fprintln(f, n)
	}
}

func databaseExists(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestDBReachable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	conn := connect(t, pgtest.DB(t))
	report(t, conn)

	is.True(strings.HasPrefix(queryString(t, conn, "SELECT current_database()"), "t_testdbreachable_"))
	is.Equal(queryString(t, conn, "SHOW server_encoding"), "UTF8")
	if externalMode() {
		cfg, err := pgconn.ParseConfig(os.Getenv(pgtest.EnvDatabaseURL))
		is.NoErr(err)
		is.Equal(queryString(t, conn, "SELECT coalesce(inet_server_port(), 0)::text"), fmt.Sprint(cfg.Port)) // connected to the INBOX_TEST_DATABASE_URL server
		return
	}
	is.Equal(queryString(t, conn, "SHOW fsync"), "off")
	is.Equal(queryString(t, conn, "SHOW synchronous_commit"), "off")
	is.Equal(queryString(t, conn, "SHOW full_page_writes"), "off")
	is.Equal(queryString(t, conn, "SHOW max_connections"), "300")
	is.Equal(queryString(t, conn, "SHOW listen_addresses"), "")                         // no TCP
	is.Equal(queryString(t, conn, "SELECT coalesce(inet_server_port(), 0)::text"), "0") // unix socket, so not the system server on 5432
	is.True(queryString(t, conn, "SHOW port") != "5432")
	is.Equal(queryString(t, conn, "SELECT current_user"), "postgres")
	is.Equal(queryString(t, conn, "SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user"), "true")
}

func TestDBsIsolated(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsnA, dsnB := pgtest.DB(t), pgtest.DB(t)
	is.True(dsnA != dsnB)
	a, b := connect(t, dsnA), connect(t, dsnB)
	report(t, a)
	report(t, b)
	is.True(queryString(t, a, "SELECT current_database()") != queryString(t, b, "SELECT current_database()"))

	_, err := a.Exec(t.Context(), "INSERT INTO widgets VALUES (1, 'only in a'); CREATE TABLE private_a (x int)")
	is.NoErr(err)
	var n int
	is.NoErr(b.QueryRow(t.Context(), "SELECT count(*) FROM widgets").Scan(&n))
	is.Equal(n, 0) // b doesn't see a's row
	_, err = b.Exec(t.Context(), "SELECT * FROM private_a")
	var pgErr *pgconn.PgError
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "42P01") // undefined_table: b doesn't see a's table

	// A test's database is dropped when the test ends, even when a
	// connection to it is still open (WITH (FORCE)).
	var inner, leaked string
	t.Run("sub", func(t *testing.T) {
		conn := connect(t, pgtest.DB(t))
		inner = queryString(t, conn, "SELECT current_database()")
		report(t, conn)
		// Deliberately left open: the database is force-dropped anyway.
		leak, err := pgx.Connect(context.Background(), pgtest.DB(t))
		if err != nil {
			t.Fatal(err)
		}
		leaked = queryString(t, leak, "SELECT current_database()")
		report(t, leak)
	})
	is.True(inner != "" && leaked != "")
	is.True(!databaseExists(t, a, inner))
	is.True(!databaseExists(t, a, leaked))
}

func TestMigrateRunsOnce(t *testing.T) {
	t.Parallel()
	t.Run("group", func(t *testing.T) {
		for i := range 10 {
			t.Run(fmt.Sprint("db", i), func(t *testing.T) {
				t.Parallel()
				conn := connect(t, pgtest.DB(t))
				var v int
				if err := conn.QueryRow(t.Context(), "SELECT version FROM schema_version").Scan(&v); err != nil {
					t.Fatal(err)
				}
				if v != 7 {
					t.Errorf("schema_version = %d, want 7", v)
				}
			})
		}
	})
	is := is.New(t)
	dsn := pgtest.DB(t)
	conn := connect(t, dsn)
	tmpl := pgtest.TemplateName()
	report(t, conn, tmpl)
	is.True(strings.HasPrefix(tmpl, "pginbox_tmpl_"))
	is.Equal(migrateCalls.Load(), int32(1)) // the migrate function runs once per test binary

	// The template is closed to connections, so clones can't fail because
	// someone is connected to it.
	cfg, err := pgx.ParseConfig(dsn)
	is.NoErr(err)
	cfg.Database = tmpl
	_, err = pgx.ConnectConfig(t.Context(), cfg)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "not currently accepting connections"))
}

func TestEmptyDB(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	conn := connect(t, pgtest.EmptyDB(t))
	report(t, conn)
	var n int
	is.NoErr(conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&n))
	is.Equal(n, 0) // no migrated tables
}

func TestManyParallelDBs(t *testing.T) {
	t.Parallel()
	var created atomic.Int64
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			t0 := time.Now()
			dsn := pgtest.DB(t)
			created.Add(int64(time.Since(t0)))
			conn := connect(t, dsn)
			if _, err := conn.Exec(t.Context(), "INSERT INTO widgets VALUES (1, 'x')"); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Cleanup(func() { t.Logf("mean DB() latency with 20 in parallel: %v", time.Duration(created.Load()/20)) })
}

func TestDBTiming(t *testing.T) {
	// Not parallel with the other DB tests' first call on purpose: just
	// report how long things take.
	t0 := time.Now()
	pgtest.DB(t) // may include cluster start and template build
	first := time.Since(t0)
	const n = 10
	t1 := time.Now()
	for range n {
		pgtest.DB(t)
	}
	t.Logf("first DB(): %v; then %v per DB()", first, time.Since(t1)/n)
}

func TestStartFsyncOn(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	t0 := time.Now()
	c, err := pgtest.Start(t.Context(), pgtest.Options{Fsync: true})
	is.NoErr(err)
	t.Logf("Start: %v (dir %s, port %d)", time.Since(t0), c.Dir(), c.Port())
	defer c.Stop()
	is.True(!strings.HasPrefix(c.Dir(), "/dev/shm/")) // durable settings belong on a real disk

	conn, err := pgx.Connect(t.Context(), c.ConnString("postgres"))
	is.NoErr(err)
	is.Equal(queryString(t, conn, "SHOW fsync"), "on")
	is.Equal(queryString(t, conn, "SHOW synchronous_commit"), "on")
	is.Equal(queryString(t, conn, "SHOW full_page_writes"), "on")
	is.Equal(queryString(t, conn, "SHOW unix_socket_directories"), c.SocketDir())
	is.NoErr(conn.Close(t.Context()))

	is.True(len(filepath.Join(c.SocketDir(), fmt.Sprintf(".s.PGSQL.%d", c.Port()))) < 100)
	_, err = os.Stat(filepath.Join(c.SocketDir(), fmt.Sprintf(".s.PGSQL.%d", c.Port())))
	is.NoErr(err)

	// The postmaster leads its own process group, so signals to ours
	// (or to a test's own child processes) don't reach it.
	pgid, err := syscall.Getpgid(c.Pid())
	is.NoErr(err)
	is.Equal(pgid, c.Pid())
	is.True(pgid != syscall.Getpgrp())

	if os.Geteuid() == 0 {
		fi, err := os.Stat(c.DataDir())
		is.NoErr(err)
		is.True(fi.Sys().(*syscall.Stat_t).Uid != 0) // owned by the postgres OS user
	}

	pid := c.Pid()
	t1 := time.Now()
	is.NoErr(c.Stop())
	t.Logf("Stop: %v", time.Since(t1))
	_, err = os.Stat(c.Dir())
	is.True(errors.Is(err, os.ErrNotExist)) // directory removed
	is.True(errors.Is(syscall.Kill(pid, 0), syscall.ESRCH))
	is.NoErr(c.Stop()) // idempotent
}

func TestStartOptions(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir, err := pgtest.FindBinDir()
	is.NoErr(err)
	c, err := pgtest.Start(t.Context(), pgtest.Options{
		BinDir:   dir,
		Settings: map[string]string{"max_connections": "40", "application_name": "it's a test"},
	})
	is.NoErr(err)
	t.Cleanup(func() { is.NoErr(c.Stop()) })
	conn := connect(t, c.ConnString("postgres"))
	is.Equal(queryString(t, conn, "SHOW max_connections"), "40") // Settings override defaults
	is.Equal(queryString(t, conn, "SHOW fsync"), "off")

	// ConnString quotes awkward database names.
	_, err = conn.Exec(t.Context(), `CREATE DATABASE "it's here"`)
	is.NoErr(err)
	other := connect(t, c.ConnString("it's here"))
	is.Equal(queryString(t, other, "SELECT current_database()"), "it's here")

	// Concurrent Stops are fine.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { c.Stop() })
	}
	wg.Wait()
}

func TestStartError(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, err := pgtest.Start(t.Context(), pgtest.Options{Settings: map[string]string{"no_such_setting": "1"}})
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), `unrecognized configuration parameter "no_such_setting"`)) // the server log tail
	t.Log(err)
}

func TestFindBinDir(t *testing.T) {
	is := is.New(t)
	dir, err := pgtest.FindBinDir()
	is.NoErr(err)
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		is.NoErr(err)
		is.True(fi.Mode()&0o111 != 0)
	}
	t.Log(dir)

	// With an empty PATH, the fallbacks still find it (here: the
	// /usr/lib/postgresql/*/bin layout).
	t.Setenv("PATH", "")
	if _, err := os.Stat("/usr/lib/postgresql"); err == nil {
		dir2, err := pgtest.FindBinDir()
		is.NoErr(err)
		is.True(strings.HasPrefix(dir2, "/usr/lib/postgresql/"))
	}
}

// TestOrphanedCluster starts a cluster in a child process, SIGKILLs the child
// and checks that the server dies with it, that the leftover directory is
// swept, and that the shared cluster is unaffected.
func TestOrphanedCluster(t *testing.T) {
	if !pgtest.HaveParentDeathSignal() {
		t.Skip("no parent-death signal on this OS")
	}
	t.Parallel()
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=orphan")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	is.NoErr(err)
	is.NoErr(cmd.Start())
	defer cmd.Process.Kill()

	line, err := bufio.NewReader(out).ReadString('\n')
	is.NoErr(err)
	var pid int
	var dir string
	_, err = fmt.Sscanf(line, "CLUSTER %d %s", &pid, &dir)
	is.NoErr(err)
	is.NoErr(syscall.Kill(pid, 0)) // server running

	is.NoErr(cmd.Process.Kill())
	cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("postmaster %d still running after its owner was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The directory is left behind, to be swept by the next Start (maybe
	// one of the parallel tests got there first).
	pgtest.SweepStale(filepath.Dir(dir))
	_, err = os.Stat(dir)
	is.True(errors.Is(err, os.ErrNotExist))

	// Killing a child process didn't disturb our own databases.
	conn := connect(t, pgtest.DB(t))
	is.Equal(queryString(t, conn, "SELECT 'ok'"), "ok")
}

// TestExternalMode re-runs the database tests of this binary in a child
// process with INBOX_TEST_DATABASE_URL pointing at an existing server, then
// checks that every database the child made is gone from it.
func TestExternalMode(t *testing.T) {
	if externalMode() {
		t.Skip("already running in INBOX_TEST_DATABASE_URL mode")
	}
	t.Parallel()
	is := is.New(t)
	url := os.Getenv("PGTEST_EXTERNAL_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Skipf("no PostgreSQL server for INBOX_TEST_DATABASE_URL mode at %s (set PGTEST_EXTERNAL_URL to use another): %v", url, err)
	}
	defer admin.Close(context.Background())

	reportFile := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(os.Args[0], "-test.run=^(TestDBReachable|TestDBsIsolated|TestMigrateRunsOnce|TestEmptyDB|TestManyParallelDBs)$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), pgtest.EnvDatabaseURL+"="+url, envReport+"="+reportFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child test run in %s mode failed: %v\n%s", pgtest.EnvDatabaseURL, err, out)
	}
	t.Logf("child output:\n%s", out)

	b, err := os.ReadFile(reportFile)
	is.NoErr(err)
	names := strings.Fields(string(b))
	is.True(len(names) >= 6)
	var sawTemplate bool
	for _, name := range names {
		sawTemplate = sawTemplate || strings.HasPrefix(name, "pginbox_tmpl_")
		if databaseExists(t, admin, name) {
			t.Errorf("database %s still exists on %s", name, url)
		}
	}
	is.True(sawTemplate)
}

func TestExternalModeNeedsCreateDB(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	// A role without CREATEDB, made on this binary's own test database
	// server (a throwaway cluster unless INBOX_TEST_DATABASE_URL is set).
	dsn := pgtest.DB(t)
	cfg, err := pgconn.ParseConfig(dsn)
	is.NoErr(err)
	if cfg.Password != "" {
		t.Skip("INBOX_TEST_DATABASE_URL has a password; a fresh role could not log in")
	}
	conn := connect(t, dsn)
	role := "pgtest_nocreatedb_" + queryString(t, conn, "SELECT substr(md5(random()::text), 1, 8)")
	_, err = conn.Exec(t.Context(), "CREATE ROLE "+role+" LOGIN")
	is.NoErr(err)
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP ROLE "+role) })

	roleDSN := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, role, cfg.Database)
	err = pgtest.ExternalModeError(t.Context(), roleDSN)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "may not create databases"))
	is.True(strings.Contains(err.Error(), "CREATEDB"))
	t.Log(err)
}

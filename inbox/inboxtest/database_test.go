package inboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/schema"
)

func externalMode() bool { return os.Getenv(inboxtest.EnvDatabaseURL) != "" }

func databaseExists(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestDatabaseReachable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	conn := connect(t, inboxtest.Database(t))
	report(t, conn)

	is.True(strings.HasPrefix(queryString(t, conn, "SELECT current_database()"), "t_testdatabasereachable_"))
	is.Equal(queryString(t, conn, "SHOW server_encoding"), "UTF8")
	if externalMode() {
		cfg, err := pgconn.ParseConfig(os.Getenv(inboxtest.EnvDatabaseURL))
		is.NoErr(err)
		is.Equal(queryString(t, conn, "SHOW port"), fmt.Sprint(cfg.Port)) // the INBOX_TEST_DATABASE_URL server
		return
	}
	// The throwaway cluster: fast, and reachable only through its socket.
	is.Equal(queryString(t, conn, "SHOW fsync"), "off")
	is.Equal(queryString(t, conn, "SHOW listen_addresses"), "")
	is.Equal(queryString(t, conn, "SELECT coalesce(inet_server_port(), 0)::text"), "0")
}

// A Database has pginbox's schema at the current version, then the
// application's migration, and no receipts.
func TestDatabaseHasBothSchemas(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn := inboxtest.Database(t)
	conn := connect(t, dsn)
	report(t, conn)
	is.NoErr(schema.Check(t.Context(), conn))
	is.Equal(queryString(t, conn, "SELECT version::text FROM app_version"), "7")
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM pginbox_receipts_live"), "0")
}

func TestDatabasesIsolated(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsnA, dsnB := inboxtest.Database(t), inboxtest.Database(t)
	is.True(dsnA != dsnB)
	a, b := connect(t, dsnA), connect(t, dsnB)
	report(t, a)
	report(t, b)
	is.True(queryString(t, a, "SELECT current_database()") != queryString(t, b, "SELECT current_database()"))

	_, err := a.Exec(t.Context(), "INSERT INTO widgets VALUES (1, 'only in a'); CREATE TABLE private_a (x int)")
	is.NoErr(err)
	is.Equal(queryString(t, b, "SELECT count(*)::text FROM widgets"), "0") // b doesn't see a's row
	_, err = b.Exec(t.Context(), "SELECT * FROM private_a")
	var pgErr *pgconn.PgError
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "42P01") // undefined_table: b doesn't see a's table

	// A test's database is dropped when the test ends, even when a
	// connection to it is still open (WITH (FORCE)).
	var inner, leaked string
	t.Run("sub", func(t *testing.T) {
		conn := connect(t, inboxtest.Database(t))
		inner = queryString(t, conn, "SELECT current_database()")
		report(t, conn)
		// Deliberately left open: the database is force-dropped anyway.
		leak, err := pgx.Connect(context.Background(), inboxtest.Database(t))
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

func TestTemplateMigratedOnce(t *testing.T) {
	t.Parallel()
	t.Run("group", func(t *testing.T) {
		for i := range 10 {
			t.Run(fmt.Sprint("db", i), func(t *testing.T) {
				t.Parallel()
				conn := connect(t, inboxtest.Database(t))
				if v := queryString(t, conn, "SELECT version::text FROM app_version"); v != "7" {
					t.Errorf("app_version = %s, want 7", v)
				}
			})
		}
	})
	is := is.New(t)
	dsn := inboxtest.Database(t)
	conn := connect(t, dsn)
	tmpl := inboxtest.TemplateName()
	report(t, conn, tmpl)
	is.True(strings.HasPrefix(tmpl, "pginbox_tmpl_"))
	is.Equal(migrateCalls.Load(), int32(1)) // the application's migration runs once per test binary

	// The template is closed to connections, so clones can't fail because
	// someone is connected to it.
	cfg, err := pgx.ParseConfig(dsn)
	is.NoErr(err)
	cfg.Database = tmpl
	_, err = pgx.ConnectConfig(t.Context(), cfg)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "not currently accepting connections"))
}

func TestEmptyDatabase(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	conn := connect(t, inboxtest.EmptyDatabase(t))
	report(t, conn)
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"), "0")
	err := schema.Check(t.Context(), conn)
	is.True(errors.Is(err, schema.ErrNotMigrated))
}

func TestManyParallelDatabases(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, inboxtest.Database(t))
			report(t, conn)
			if _, err := conn.Exec(t.Context(), "INSERT INTO widgets VALUES (1, 'x')"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPool(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var pool *pgxpool.Pool
	t.Run("sub", func(t *testing.T) {
		pool = inboxtest.Pool(t, func(cfg *pgxpool.Config) {
			cfg.ConnConfig.RuntimeParams["application_name"] = "inboxtest-pool"
		})
		is.Equal(pool.Config().MaxConns, int32(inboxtest.DefaultPoolMaxConns))
		var app string
		is.NoErr(pool.QueryRow(t.Context(), "SELECT current_setting('application_name')").Scan(&app))
		is.Equal(app, "inboxtest-pool") // the configure function ran
		is.NoErr(schema.Check(t.Context(), pool))

		other := inboxtest.Pool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 3 })
		is.Equal(other.Config().MaxConns, int32(3)) // configure runs after the default
	})
	// Closed when the test ended.
	err := pool.Ping(context.Background())
	is.True(err != nil)
}

// A SetMigrate call after the template was built could not take effect.
func TestSetMigrateAfterTemplatePanics(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	inboxtest.Database(t) // the template exists now
	defer func() {
		r := recover()
		is.True(r != nil)
		is.True(strings.Contains(fmt.Sprint(r), "call it in TestMain before inboxtest.Main"))
	}()
	inboxtest.SetMigrate(migrateWidgets)
}

// TestExternalMode re-runs the database tests of this binary in a child
// process with INBOX_TEST_DATABASE_URL pointing at another server, then checks
// that every database the child made is gone from it. The server is
// INBOXTEST_EXTERNAL_URL when set, otherwise a second throwaway cluster where
// the child's role has CREATEDB and nothing more.
func TestExternalMode(t *testing.T) {
	if externalMode() {
		t.Skip("already running in INBOX_TEST_DATABASE_URL mode")
	}
	t.Parallel()
	is := is.New(t)
	adminURL, childURL := os.Getenv("INBOXTEST_EXTERNAL_URL"), os.Getenv("INBOXTEST_EXTERNAL_URL")
	if adminURL == "" {
		c, err := pgcluster.Start(t.Context(), pgcluster.Options{})
		is.NoErr(err)
		t.Cleanup(func() { c.Stop() })
		admin := connect(t, c.ConnString("postgres"))
		_, err = admin.Exec(t.Context(), "CREATE ROLE app LOGIN CREATEDB")
		is.NoErr(err)
		// The URL form, with the socket directory as a query parameter.
		u := url.URL{Scheme: "postgres", User: url.User("app"), Path: "/postgres",
			RawQuery: url.Values{"host": {c.SocketDir()}, "port": {fmt.Sprint(c.Port())}, "sslmode": {"disable"}}.Encode()}
		adminURL, childURL = c.ConnString("postgres"), u.String()
	}
	admin := connect(t, adminURL)

	reportFile := filepath.Join(t.TempDir(), "report")
	out, err := runChild(t, "^(TestDatabaseReachable|TestDatabaseHasBothSchemas|TestDatabasesIsolated|TestTemplateMigratedOnce|TestEmptyDatabase|TestManyParallelDatabases)$",
		inboxtest.EnvDatabaseURL+"="+childURL, envReport+"="+reportFile)
	if err != nil {
		t.Fatalf("child test run in %s mode failed: %v\n%s", inboxtest.EnvDatabaseURL, err, out)
	}
	t.Logf("child output:\n%s", out)

	b, err := os.ReadFile(reportFile)
	is.NoErr(err)
	names := strings.Fields(string(b))
	is.True(len(names) >= 27) // every database the child tests reported, and the template
	var sawTemplate bool
	for _, name := range names {
		sawTemplate = sawTemplate || strings.HasPrefix(name, "pginbox_tmpl_")
		if databaseExists(t, admin, name) {
			t.Errorf("database %s still exists on the %s server", name, inboxtest.EnvDatabaseURL)
		}
	}
	is.True(sawTemplate)
}

// The keyword/value form of INBOX_TEST_DATABASE_URL works as well as a URL.
func TestExternalModeKeywordValue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	cfg, err := pgconn.ParseConfig(inboxtest.EmptyDatabase(t))
	is.NoErr(err)
	if cfg.Password != "" {
		t.Skip("INBOX_TEST_DATABASE_URL has a password; this test rebuilds a connection string without it")
	}
	adminDSN := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	dsn, drop, err := inboxtest.ExternalDatabase(t.Context(), adminDSN)
	is.NoErr(err)
	conn, err := pgx.Connect(t.Context(), dsn)
	is.NoErr(err)
	name := queryString(t, conn, "SELECT current_database()")
	is.True(strings.HasPrefix(name, "t_external_"))
	is.NoErr(conn.Close(t.Context()))
	is.NoErr(drop())
	is.True(!databaseExists(t, connect(t, adminDSN), name))
}

func TestExternalModeNeedsCreateDB(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	// A role without CREATEDB, made on this binary's own test server.
	dsn := inboxtest.EmptyDatabase(t)
	cfg, err := pgconn.ParseConfig(dsn)
	is.NoErr(err)
	if cfg.Password != "" {
		t.Skip("INBOX_TEST_DATABASE_URL has a password; a fresh role could not log in")
	}
	conn := connect(t, dsn)
	role := "inboxtest_nocreatedb_" + queryString(t, conn, "SELECT substr(md5(random()::text), 1, 8)")
	_, err = conn.Exec(t.Context(), "CREATE ROLE "+role+" LOGIN")
	is.NoErr(err)
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP ROLE "+role) })

	roleDSN := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, role, cfg.Database)
	_, _, err = inboxtest.ExternalDatabase(t.Context(), roleDSN)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), fmt.Sprintf("role %q may not create databases", role)))
	is.True(strings.Contains(err.Error(), `ALTER ROLE "`+role+`" CREATEDB`)) // says what to do
	t.Log(err)
}

// A server that does not answer, or a variable that is not a connection
// string, fails with what to do about it.
func TestExternalModeBadURL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cases := []struct{ dsn, want string }{
		{"host=" + t.TempDir() + " port=5 user=nobody dbname=postgres", "start that server, fix the variable, or unset it to use a throwaway cluster"},
		{"postgres://%zz", "is not a connection string"},
		{"port=notanumber", "is not a connection string"},
	}
	for _, tc := range cases {
		_, _, err := inboxtest.ExternalDatabase(ctx, tc.dsn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.dsn, err, tc.want)
		}
	}
}

// Setup failures fail the test with what went wrong and what to do: here a
// failing application migration, and server binaries that do not work.
func TestDatabaseSetupFailures(t *testing.T) {
	if externalMode() {
		t.Skip("the broken server binaries case needs the throwaway cluster")
	}
	t.Parallel()
	t.Run("migration", func(t *testing.T) {
		t.Parallel()
		out, err := runChild(t, "^TestDatabaseReachable$", envFailMigrate+"=1")
		if err == nil {
			t.Fatalf("child passed with a failing migration:\n%s", out)
		}
		if !strings.Contains(out, "the SetMigrate function failed on the template database") || !strings.Contains(out, "widgets: syntax error at line 3") {
			t.Fatalf("child output does not name the failing migration:\n%s", out)
		}
	})
	t.Run("binaries", func(t *testing.T) {
		t.Parallel()
		// initdb, pg_ctl and postgres that exist but fail, first on PATH.
		bin := t.TempDir()
		for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
			script := "#!/bin/sh\necho \"" + name + ": broken install\" >&2\nexit 1\n"
			if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		out, err := runChild(t, "^TestDatabaseReachable$", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if err == nil {
			t.Fatalf("child passed with broken server binaries:\n%s", out)
		}
		want := "inboxtest: starting a throwaway PostgreSQL (or set " + inboxtest.EnvDatabaseURL + " to use an existing server): pgcluster: initdb failed"
		if !strings.Contains(out, want) {
			t.Fatalf("child output does not contain %q:\n%s", want, out)
		}
	})
}

// The test shown by ExamplePool runs as written.
func TestPoolExample(t *testing.T) {
	widgetCreatedTest(t)
}

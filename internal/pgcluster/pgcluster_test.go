package pgcluster_test

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
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// envHelper re-runs this test binary as a helper process: "orphan" starts a
// cluster, "citus" a Citus cluster; each prints it and waits to be killed.
const envHelper = "PGCLUSTER_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(envHelper) {
	case "orphan":
		orphanHelper()
		return
	case "citus":
		citusHelper()
		return
	}
	os.Exit(m.Run())
}

// orphanHelper starts a cluster, reports it on stdout and blocks until the
// parent kills this process.
func orphanHelper() {
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Printf("CLUSTER %d %s\n", c.Pid(), c.Dir())
	select {}
}

// citusHelper starts a Citus cluster, reports its postmasters' pids on
// stdout and blocks until the parent kills this process.
func citusHelper() {
	c, err := pgcluster.StartCitus(context.Background(), pgcluster.CitusOptions{})
	if errors.Is(err, pgcluster.ErrCitusNotInstalled) {
		fmt.Println("SKIP", err)
		os.Exit(0)
	}
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Print("CITUS")
	for _, n := range c.Nodes() {
		fmt.Print(" ", n.Pid())
	}
	fmt.Println()
	select {}
}

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

func start(t *testing.T, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// The zero Options give a fast, private server: no fsync, no TCP.
func TestStartDefaults(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := start(t, pgcluster.Options{})
	conn := connect(t, c.ConnString("postgres"))
	is.Equal(queryString(t, conn, "SHOW fsync"), "off")
	is.Equal(queryString(t, conn, "SHOW synchronous_commit"), "off")
	is.Equal(queryString(t, conn, "SHOW full_page_writes"), "off")
	is.Equal(queryString(t, conn, "SHOW server_encoding"), "UTF8")
	is.Equal(queryString(t, conn, "SHOW max_connections"), fmt.Sprint(pgcluster.MaxConnections))
	is.Equal(queryString(t, conn, "SHOW listen_addresses"), "")                         // no TCP
	is.Equal(queryString(t, conn, "SELECT coalesce(inet_server_port(), 0)::text"), "0") // unix socket, so not the system server on 5432
	is.Equal(queryString(t, conn, "SHOW port"), fmt.Sprint(c.Port()))
	is.Equal(queryString(t, conn, "SELECT current_user"), pgcluster.Superuser)
	is.Equal(queryString(t, conn, "SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user"), "true")
	is.True(strings.HasPrefix(filepath.Base(c.Dir()), "pgcluster-"))
}

func TestStartFsyncOn(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	t0 := time.Now()
	c, err := pgcluster.Start(t.Context(), pgcluster.Options{Fsync: true})
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
	dir, err := pgcluster.FindBinDir()
	is.NoErr(err)
	c, err := pgcluster.Start(t.Context(), pgcluster.Options{
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
	_, err := pgcluster.Start(t.Context(), pgcluster.Options{Settings: map[string]string{"no_such_setting": "1"}})
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), `unrecognized configuration parameter "no_such_setting"`)) // the server log tail
	t.Log(err)
}

func TestFindBinDir(t *testing.T) {
	is := is.New(t)
	dir, err := pgcluster.FindBinDir()
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
		dir2, err := pgcluster.FindBinDir()
		is.NoErr(err)
		is.True(strings.HasPrefix(dir2, "/usr/lib/postgresql/"))
	}
}

// Without the server binaries, FindBinDir (and so Start) says where it looked
// and how to install them. Not parallel: it changes PATH and a package variable.
func TestFindBinDirMissing(t *testing.T) {
	is := is.New(t)
	t.Setenv("PATH", t.TempDir()) // neither initdb nor pg_config
	defer pgcluster.SetDebianBinDirs(filepath.Join(t.TempDir(), "*", "bin"))()

	_, err := pgcluster.FindBinDir()
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found"))
	is.True(strings.Contains(err.Error(), "apt-get install postgresql")) // says what to do

	_, err2 := pgcluster.Start(t.Context(), pgcluster.Options{})
	is.True(err2 != nil)
	is.Equal(err2.Error(), err.Error())
	t.Log(err)
}

func TestStartBinDirWithoutServer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	_, err := pgcluster.Start(t.Context(), pgcluster.Options{BinDir: dir})
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "Options.BinDir "+dir+" does not hold the PostgreSQL server binaries"))
	is.True(strings.Contains(err.Error(), "pg_config --bindir"))
}

// TestOrphanedCluster starts a cluster in a child process, SIGKILLs the child
// and checks that the server dies with it, that the leftover directory is
// swept, and that a server this process started itself is unaffected.
func TestOrphanedCluster(t *testing.T) {
	if !pgcluster.HaveParentDeathSignal() {
		t.Skip("no parent-death signal on this OS")
	}
	t.Parallel()
	is := is.New(t)
	ours := start(t, pgcluster.Options{})
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
	testkit.WaitProcessGone(t, pid, 30*time.Second, "the postmaster after its owner was killed")
	// The directory is left behind, to be swept by the next Start (maybe
	// one of the parallel tests got there first).
	pgcluster.SweepStale(filepath.Dir(dir))
	_, err = os.Stat(dir)
	is.True(errors.Is(err, os.ErrNotExist))

	// Killing a child process didn't disturb this process's own server.
	conn := connect(t, ours.ConnString("postgres"))
	is.Equal(queryString(t, conn, "SELECT 'ok'"), "ok")
}

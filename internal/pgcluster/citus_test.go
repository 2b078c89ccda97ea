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
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// startCitus starts a Citus cluster for one test, or skips the test when
// Citus is not installed (fails it in CI).
func startCitus(t *testing.T, opts pgcluster.CitusOptions) *pgcluster.Citus {
	t.Helper()
	c, err := pgcluster.StartCitus(t.Context(), opts)
	if errors.Is(err, pgcluster.ErrCitusNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("pgcluster: skipping: %v", err)
	}
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

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// A Citus cluster is three servers on loopback TCP with Citus loaded;
// CreateDatabase gives a database ready on every node, isolated from the
// next one, and DropDatabase removes it everywhere. Stop leaves nothing.
func TestStartCitus(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := startCitus(t, pgcluster.CitusOptions{})
	is.Equal(len(c.Workers), 2)
	is.Equal(len(c.Nodes()), 3)
	is.Equal(c.Nodes()[0], c.Coordinator)
	is.Equal(c.ConnString("x"), c.Coordinator.ConnString("x"))

	for _, n := range c.Nodes() {
		conn := connect(t, n.ConnString("postgres"))
		is.Equal(queryString(t, conn, "SHOW shared_preload_libraries"), "citus")
		is.Equal(queryString(t, conn, "SHOW listen_addresses"), "127.0.0.1")
		is.Equal(queryString(t, conn, "SHOW fsync"), "off")
		is.Equal(queryString(t, conn, "SHOW wal_level"), "logical")
		// Reachable over TCP at its port, as the other nodes reach it.
		tcp := connect(t, fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", n.Port()))
		is.Equal(queryString(t, tcp, "SELECT inet_server_port()::text"), fmt.Sprint(n.Port()))
	}

	is.NoErr(c.CreateDatabase(t.Context(), "one"))
	is.NoErr(c.CreateDatabase(t.Context(), "two"))
	one := connect(t, c.ConnString("one"))
	is.Equal(queryString(t, one, "SELECT extversion FROM pg_extension WHERE extname = 'citus'"), "13.2-1")
	is.Equal(queryString(t, one, "SELECT string_agg(groupid || ':' || nodeport || ':' || shouldhaveshards, ',' ORDER BY groupid) FROM pg_dist_node"),
		fmt.Sprintf("0:%d:false,1:%d:true,2:%d:true", c.Coordinator.Port(), c.Workers[0].Port(), c.Workers[1].Port()))
	_, err := one.Exec(t.Context(), "CREATE TABLE t (k text PRIMARY KEY); SELECT create_distributed_table('t', 'k'); INSERT INTO t VALUES ('a'), ('b')")
	is.NoErr(err)
	is.Equal(queryString(t, one, "SELECT count(DISTINCT nodeport)::text FROM citus_shards WHERE table_name = 't'::regclass"), "2")

	// Citus metadata is per database: "two" has no table t, on any node.
	two := connect(t, c.ConnString("two"))
	is.Equal(queryString(t, two, "SELECT count(*)::text FROM pg_dist_partition"), "0")
	is.Equal(queryString(t, two, "SELECT (to_regclass('t') IS NULL)::text"), "true")

	is.NoErr(c.DropDatabase(t.Context(), "one"))
	is.NoErr(c.DropDatabase(t.Context(), "one")) // already gone: fine
	for _, n := range c.Nodes() {
		conn := connect(t, n.ConnString("postgres"))
		is.Equal(queryString(t, conn, "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database WHERE datname IN ('one', 'two')"), "two")
	}

	t.Run("CreateDatabaseConflict", func(t *testing.T) { testCitusCreateDatabaseConflict(t, c) })
	t.Run("DropDatabasePrepared", func(t *testing.T) { testCitusDropDatabasePrepared(t, c) })
	t.Run("DropDatabaseSlowSession", func(t *testing.T) { testCitusDropDatabaseSlowSession(t, c) })

	pids := []int{}
	for _, n := range c.Nodes() {
		pids = append(pids, n.Pid())
	}
	is.NoErr(c.Stop())
	is.NoErr(c.Stop()) // idempotent
	for i, n := range c.Nodes() {
		is.True(!alive(pids[i]))
		_, err := os.Stat(n.Dir())
		is.True(errors.Is(err, os.ErrNotExist))
	}
}

// A start that fails after the nodes are up stops and removes all of them.
func TestStartCitusFailureStopsNodes(t *testing.T) {
	is := is.New(t)
	var nodes []*pgcluster.Cluster
	var pids []int
	defer pgcluster.SetCitusStartHook(func(c *pgcluster.Citus) error {
		nodes = c.Nodes()
		for _, n := range nodes {
			pids = append(pids, n.Pid())
		}
		return errors.New("injected failure")
	})()
	_, err := pgcluster.StartCitus(t.Context(), pgcluster.CitusOptions{})
	if errors.Is(err, pgcluster.ErrCitusNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("pgcluster: skipping: %v", err)
	}
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "injected failure"))
	is.Equal(len(nodes), 3)
	for i, n := range nodes {
		is.True(!alive(pids[i]))
		_, err := os.Stat(n.Dir())
		is.True(errors.Is(err, os.ErrNotExist))
	}
}

// Without citus.so, StartCitus says so (errors.Is ErrCitusNotInstalled) and
// says how to install it, before starting anything.
func TestStartCitusNotInstalled(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	real, err := pgcluster.FindBinDir()
	is.NoErr(err)
	bin := t.TempDir()
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		is.NoErr(os.Symlink(filepath.Join(real, name), filepath.Join(bin, name)))
	}
	lib := t.TempDir() // no citus.so here
	is.NoErr(os.WriteFile(filepath.Join(bin, "pg_config"), []byte("#!/bin/sh\necho "+lib+"\n"), 0o755))
	_, err = pgcluster.StartCitus(t.Context(), pgcluster.CitusOptions{Node: pgcluster.Options{BinDir: bin}})
	is.True(errors.Is(err, pgcluster.ErrCitusNotInstalled))
	is.True(strings.Contains(err.Error(), "no citus.so in "+lib))
	is.True(strings.Contains(err.Error(), "build Citus 13.2 from source"))
	t.Log(err)
}

// TestCitusOrphaned starts a Citus cluster in a child process, SIGKILLs the
// child and checks that all three servers die with it.
func TestCitusOrphaned(t *testing.T) {
	if !pgcluster.HaveParentDeathSignal() {
		t.Skip("no parent-death signal on this OS")
	}
	t.Parallel()
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=citus")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	is.NoErr(err)
	is.NoErr(cmd.Start())
	defer cmd.Process.Kill()

	line, err := bufio.NewReader(out).ReadString('\n')
	is.NoErr(err)
	if strings.HasPrefix(line, "SKIP ") && os.Getenv("CI") != "true" {
		t.Skip(strings.TrimSpace(strings.TrimPrefix(line, "SKIP ")))
	}
	fields := strings.Fields(line)
	is.Equal(len(fields), 4) // CITUS pid pid pid
	is.Equal(fields[0], "CITUS")
	var pids []int
	for _, f := range fields[1:] {
		var pid int
		_, err := fmt.Sscan(f, &pid)
		is.NoErr(err)
		is.True(alive(pid))
		pids = append(pids, pid)
	}

	is.NoErr(cmd.Process.Kill())
	cmd.Wait()
	for _, pid := range pids {
		testkit.WaitProcessGone(t, pid, 30*time.Second, "a postmaster after its owner was killed")
	}
}

// A database name already taken on one node fails CreateDatabase, and the
// copies made on the other nodes are dropped again.
func testCitusCreateDatabaseConflict(t *testing.T, c *pgcluster.Citus) {
	is := is.New(t)
	w := connect(t, c.Workers[0].ConnString("postgres"))
	_, err := w.Exec(t.Context(), "CREATE DATABASE taken")
	is.NoErr(err)
	err = c.CreateDatabase(t.Context(), "taken")
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), `database "taken" already exists`))
	for _, n := range []*pgcluster.Cluster{c.Coordinator, c.Workers[1]} {
		conn := connect(t, n.ConnString("postgres"))
		is.Equal(queryString(t, conn, "SELECT count(*)::text FROM pg_database WHERE datname = 'taken'"), "0")
	}
}

// DropDatabase rolls back a two-phase commit left prepared in the database,
// which would otherwise block DROP DATABASE.
func testCitusDropDatabasePrepared(t *testing.T, c *pgcluster.Citus) {
	is := is.New(t)
	is.NoErr(c.CreateDatabase(t.Context(), "prep"))
	w := connect(t, c.Workers[0].ConnString("prep"))
	_, err := w.Exec(t.Context(), "CREATE TABLE x (n int); BEGIN; INSERT INTO x VALUES (1); PREPARE TRANSACTION 'left_behind'")
	is.NoErr(err)
	is.NoErr(w.Close(t.Context()))
	is.NoErr(c.DropDatabase(t.Context(), "prep"))
	conn := connect(t, c.Workers[0].ConnString("postgres"))
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM pg_prepared_xacts"), "0")
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM pg_database WHERE datname = 'prep'"), "0")
}

// BenchmarkCitusDatabase measures what a test's own Citus database costs:
// CreateDatabase and DropDatabase on a coordinator and two workers.
func BenchmarkCitusDatabase(b *testing.B) {
	c, err := pgcluster.StartCitus(b.Context(), pgcluster.CitusOptions{})
	if errors.Is(err, pgcluster.ErrCitusNotInstalled) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	i := 0
	for b.Loop() {
		i++
		name := fmt.Sprintf("bench_%d", i)
		if err := c.CreateDatabase(b.Context(), name); err != nil {
			b.Fatal(err)
		}
		if err := c.DropDatabase(b.Context(), name); err != nil {
			b.Fatal(err)
		}
	}
}

// DropDatabase outlasts a session that takes longer to end than the 5 s
// DROP DATABASE ... WITH (FORCE) waits for it. A backend blocked opening a
// FIFO ignores SIGTERM until a writer shows up; on a loaded machine ordinary
// backends can be that slow to exit too.
func testCitusDropDatabaseSlowSession(t *testing.T, c *pgcluster.Citus) {
	is := is.New(t)
	is.NoErr(c.CreateDatabase(t.Context(), "slow"))
	fifo := filepath.Join(c.Workers[0].Dir(), "block.fifo")
	is.NoErr(syscall.Mkfifo(fifo, 0o666))
	w := connect(t, c.Workers[0].ConnString("slow"))
	ended := make(chan error, 1)
	go func() {
		_, err := w.Exec(context.Background(), "SELECT pg_read_file($1)", fifo)
		ended <- err
	}()
	admin := connect(t, c.Workers[0].ConnString("postgres"))
	testkit.Eventually(t, time.Minute, func() bool {
		return queryString(t, admin, "SELECT count(*)::text FROM pg_stat_activity WHERE datname = 'slow' AND query LIKE '%pg_read_file%'") != "0"
	}, "the session to block on the FIFO")
	go func() {
		// Past the 5 s that DROP DATABASE ... WITH (FORCE) waits for the
		// session, inside one statement: the wait running out is the point,
		// and nothing reports it.
		time.Sleep(7 * time.Second)
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	}()
	t0 := time.Now()
	is.NoErr(c.DropDatabase(t.Context(), "slow"))
	t.Logf("DropDatabase took %v", time.Since(t0))
	is.True(<-ended != nil) // the session was ended
	is.Equal(queryString(t, admin, "SELECT count(*)::text FROM pg_database WHERE datname = 'slow'"), "0")
}

// A session that reached a template anyway (here: one opened while it still
// allowed connections) would make every CREATE DATABASE from it fail with
// "being accessed by other users" for as long as it stays: CreateDatabaseFrom
// ends it and clones.
func TestCreateDatabaseFromEndsASessionInTheTemplate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := t.Context()
	c := startCitus(t, pgcluster.CitusOptions{})
	is.NoErr(c.CreateDatabase(ctx, "tmpl"))
	holder, err := pgx.Connect(ctx, c.Coordinator.ConnString("tmpl"))
	is.NoErr(err)
	defer holder.Close(context.Background())
	is.NoErr(holder.Ping(ctx))

	start := time.Now()
	is.NoErr(c.CreateDatabaseFrom(ctx, "clone", "tmpl"))
	t.Logf("cloned in %s", time.Since(start).Round(time.Millisecond))
	is.True(holder.Ping(ctx) != nil) // its session was ended
}

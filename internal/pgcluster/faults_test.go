package pgcluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// A SIGKILL of the postmaster leaves its backends to exit on their own;
// Shutdown(ShutdownKill) returns once they have, Start runs crash recovery
// on the same data directory, and what was committed is there.
func TestShutdownKill(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := start(t, pgcluster.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	conn := connect(t, c.ConnString("postgres"))
	_, err := conn.Exec(t.Context(), "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)")
	is.NoErr(err)
	var backend int
	is.NoErr(conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&backend))
	pid := c.Pid()

	is.NoErr(c.Shutdown(pgcluster.ShutdownKill))
	is.True(testkit.ProcessGone(pid))     // the postmaster
	is.True(testkit.ProcessGone(backend)) // and its orphaned backend are gone
	_, err = conn.Exec(t.Context(), "SELECT 1")
	is.True(err != nil)
	is.NoErr(c.Shutdown(pgcluster.ShutdownKill)) // already down: nothing to do

	is.NoErr(c.Start(t.Context()))
	is.NoErr(c.Start(t.Context())) // already up: nothing to do
	is.True(c.Pid() != pid)
	conn = connect(t, c.ConnString("postgres"))
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM kept"), "1")
	is.Equal(pgcluster.ShutdownKill.String(), "kill")
	log := c.LogTail()
	is.True(strings.Contains(log, "was interrupted") || strings.Contains(log, "not properly shut down")) // crash recovery ran
}

// The Citus fault kit: a worker node killed (SIGKILL) or stopped fails the
// statements routed to its shards while the other node's shards answer;
// started again at its port, Citus reaches it again. The coordinator
// restarts. MoveShard moves a shard (and its colocated shards) online to the
// other worker, rows and all: the nodes run with wal_level = logical.
func TestCitusFaults(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := t.Context()
	// synchronous_commit on: with it off (what fsync off sets), a commit
	// acknowledged just before the SIGKILL may not be in the WAL yet.
	c := startCitus(t, pgcluster.CitusOptions{Node: pgcluster.Options{Settings: map[string]string{"synchronous_commit": "on"}}})
	is.NoErr(c.CreateDatabase(ctx, "faults"))
	conn := connect(t, c.ConnString("faults"))
	_, err := conn.Exec(ctx, `
		CREATE TABLE t (tenant text, n int, PRIMARY KEY (tenant, n));
		SELECT create_distributed_table('t', 'tenant');
		CREATE TABLE u (tenant text, n int);
		ALTER TABLE u REPLICA IDENTITY FULL;
		SELECT create_distributed_table('u', 'tenant', colocate_with => 't');`)
	is.NoErr(err)
	// A tenant on each worker.
	home := map[*pgcluster.Cluster]string{}
	for i := 0; len(home) < 2 && i < 100; i++ {
		tenant := fmt.Sprint("tenant-", i)
		_, n, err := c.ShardOf(ctx, "faults", "t", tenant)
		is.NoErr(err)
		if _, ok := home[n]; !ok {
			home[n] = tenant
		}
	}
	is.Equal(len(home), 2)
	a, b := home[c.Workers[0]], home[c.Workers[1]]
	insert := func(conn *pgx.Conn, tenant string, n int) error {
		if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1, $2)", tenant, n); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, "INSERT INTO u VALUES ($1, $2)", tenant, n)
		return err
	}
	is.NoErr(insert(conn, a, 1))
	is.NoErr(insert(conn, b, 1))

	for _, mode := range []pgcluster.ShutdownMode{pgcluster.ShutdownKill, pgcluster.ShutdownFast} {
		is.NoErr(c.Workers[0].Shutdown(mode))
		conn = connect(t, c.ConnString("faults")) // Citus's cached connection to the node broke
		is.True(insert(conn, a, 2) != nil)        // its node is down
		is.NoErr(insert(conn, b, 2))              // the other node's tenants go on
		is.NoErr(c.Workers[0].Start(ctx))
		testkit.EventuallyNoError(t, 5*time.Second, func() error { return insert(conn, a, 2) }, "an insert on the restarted node")
		_, err = conn.Exec(ctx, "DELETE FROM t WHERE n = 2; DELETE FROM u WHERE n = 2")
		is.NoErr(err)
	}

	is.NoErr(c.Coordinator.Restart(ctx, pgcluster.ShutdownFast))
	conn = connect(t, c.ConnString("faults"))
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM t"), "2")

	shard, from, err := c.ShardOf(ctx, "faults", "t", a)
	is.NoErr(err)
	is.Equal(from, c.Workers[0])
	moved, err := c.MoveShard(ctx, "faults", shard, c.Workers[1])
	is.NoErr(err)
	is.Equal(moved, c.Workers[0])
	_, now, err := c.ShardOf(ctx, "faults", "u", a) // the colocated shard went along
	is.NoErr(err)
	is.Equal(now, c.Workers[1])
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM t WHERE tenant = '"+a+"'"), "1")
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM u WHERE tenant = '"+a+"'"), "1")
	is.NoErr(insert(conn, a, 3))
	_, err = c.MoveShard(ctx, "faults", shard, c.Workers[1])
	is.True(err != nil) // already there
	is.NoErr(c.DropDatabase(context.Background(), "faults"))
}

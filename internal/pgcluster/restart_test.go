package pgcluster_test

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// Restart keeps the data directory, the socket and the settings: committed
// rows survive both shutdown modes, and the postmaster is a new process.
func TestRestart(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := start(t, pgcluster.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	conn := connect(t, c.ConnString("postgres"))
	_, err := conn.Exec(t.Context(), "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)")
	is.NoErr(err)

	for i, mode := range []pgcluster.ShutdownMode{pgcluster.ShutdownFast, pgcluster.ShutdownImmediate} {
		pid := c.Pid()
		is.NoErr(c.Restart(t.Context(), mode))
		is.True(c.Pid() != pid)
		_, err := conn.Exec(t.Context(), "SELECT 1")
		is.True(err != nil) // the old session is gone
		conn = connect(t, c.ConnString("postgres"))
		is.Equal(queryString(t, conn, "SELECT count(*)::text FROM kept"), []string{"1", "2"}[i])
		is.Equal(queryString(t, conn, "SHOW synchronous_commit"), "on")
		_, err = conn.Exec(t.Context(), "INSERT INTO kept VALUES (2)")
		is.NoErr(err)
	}
	is.Equal(pgcluster.ShutdownImmediate.String(), "immediate")
}

// A standby follows its primary (synchronously when named in
// synchronous_standby_names), refuses writes until promoted, and keeps
// everything the primary committed after the primary is gone.
func TestStandbyAndPromote(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	primary := start(t, pgcluster.Options{Settings: map[string]string{
		"synchronous_commit":        "on",
		"synchronous_standby_names": "replica1",
	}})
	standby, err := primary.StartStandby(t.Context(), "replica1", pgcluster.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	is.NoErr(err)
	t.Cleanup(func() { is.NoErr(standby.Stop()) })

	pc := connect(t, primary.ConnString("postgres"))
	// The standby counts as synchronous once it streams (after catching up).
	testkit.Eventually(t, 30*time.Second, func() bool {
		return queryString(t, pc, "SELECT coalesce(max(sync_state), 'none') FROM pg_stat_replication WHERE application_name = 'replica1'") == "sync"
	}, "the standby to become synchronous")
	// remote_apply: the commit returns once the standby has applied it. With
	// "on" it waits for the standby's flush only, and a read there could
	// still miss the table (seen in CI).
	_, err = pc.Exec(t.Context(), "SET synchronous_commit = remote_apply; CREATE TABLE t (n int); INSERT INTO t VALUES (1)")
	is.NoErr(err)

	sc := connect(t, standby.ConnString("postgres"))
	is.Equal(queryString(t, sc, "SELECT pg_is_in_recovery()::text"), "true")
	is.Equal(queryString(t, sc, "SELECT count(*)::text FROM t"), "1") // synchronous: already there
	_, err = sc.Exec(t.Context(), "INSERT INTO t VALUES (2)")
	is.True(err != nil) // read-only

	// target_session_attrs picks whichever of the two hosts accepts writes.
	multi := "host=" + primary.SocketDir() + "," + standby.SocketDir() + " port=" + fmt.Sprint(primary.Port()) + "," + fmt.Sprint(standby.Port()) +
		" user=postgres dbname=postgres sslmode=disable target_session_attrs=read-write"
	is.Equal(queryString(t, connect(t, multi), "SHOW port"), fmt.Sprint(primary.Port()))

	is.NoErr(primary.Shutdown(pgcluster.ShutdownImmediate))
	is.NoErr(standby.Promote(t.Context()))
	is.Equal(queryString(t, sc, "SELECT pg_is_in_recovery()::text"), "false")
	_, err = sc.Exec(t.Context(), "INSERT INTO t VALUES (2)")
	is.NoErr(err)
	mc, err := pgx.Connect(t.Context(), multi)
	is.NoErr(err)
	defer mc.Close(t.Context())
	is.Equal(queryString(t, mc, "SHOW port"), fmt.Sprint(standby.Port()))
	is.Equal(queryString(t, mc, "SELECT count(*)::text FROM t"), "2")
}

// With Options.TCP the server also listens on 127.0.0.1 at Port, below the
// ephemeral port range, and keeps that port across a restart.
func TestStartTCP(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := start(t, pgcluster.Options{TCP: true})
	is.True(c.Port() >= 20000 && c.Port() < 32000)
	tcp := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", c.Port())
	conn := connect(t, tcp)
	is.Equal(queryString(t, conn, "SELECT inet_server_port()::text"), fmt.Sprint(c.Port()))
	is.Equal(queryString(t, conn, "SHOW listen_addresses"), "127.0.0.1")
	is.Equal(queryString(t, connect(t, c.ConnString("postgres")), "SELECT coalesce(inet_server_port(), 0)::text"), "0") // ConnString still uses the socket

	is.NoErr(c.Restart(t.Context(), pgcluster.ShutdownImmediate))
	conn = connect(t, tcp)
	is.Equal(queryString(t, conn, "SELECT inet_server_port()::text"), fmt.Sprint(c.Port()))
}

// Options.WALDir puts pg_wal in a directory of the caller's choosing (a
// small file system, for a WAL-volume-full drill) and WALSegmentMB sets the
// segment size; StartAgain starts a server that exited on its own (here: an
// immediate shutdown behind the cluster's back, as a PANIC it cannot recover
// from ends it) on the same data, and refuses while it runs.
func TestWALDirAndStartAgain(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	parent, err := os.MkdirTemp("", "pgcluster-wal-") // traversable by postgres, unlike t.TempDir's parent
	is.NoErr(err)
	t.Cleanup(func() { os.RemoveAll(parent) })
	if os.Geteuid() == 0 { // initdb runs as postgres and creates the directory
		u, err := user.Lookup("postgres")
		is.NoErr(err)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		is.NoErr(os.Chown(parent, uid, gid))
	}
	walDir := filepath.Join(parent, "wal")
	c := start(t, pgcluster.Options{WALDir: walDir, WALSegmentMB: 1, Settings: map[string]string{"synchronous_commit": "on"}})
	link, err := os.Readlink(filepath.Join(c.DataDir(), "pg_wal"))
	is.NoErr(err)
	is.Equal(link, walDir)
	conn := connect(t, c.ConnString("postgres"))
	is.Equal(queryString(t, conn, "SHOW wal_segment_size"), "1MB")
	_, err = conn.Exec(t.Context(), "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)")
	is.NoErr(err)

	is.True(c.StartAgain(t.Context()) != nil) // it runs
	is.True(c.Running())
	is.NoErr(syscall.Kill(c.Pid(), syscall.SIGQUIT))
	testkit.Eventually(t, 30*time.Second, func() bool { return !c.Running() }, "the postmaster to exit on SIGQUIT")
	is.NoErr(c.StartAgain(t.Context()))
	is.True(c.Running())
	is.Equal(queryString(t, connect(t, c.ConnString("postgres")), "SELECT count(*)::text FROM kept"), "1")
}

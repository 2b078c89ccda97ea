// Package pgcluster runs throwaway PostgreSQL servers from the installed
// server binaries. It is for code that needs a database it can throw away:
// the test kit (package inbox/inboxtest), `inbox demo` and `inbox bench`.
// It has no dependency on package testing.
//
// [Start] runs initdb in a fresh temporary directory, starts postgres
// listening on a unix socket only (no TCP), and [Cluster.Stop] removes
// everything again. [FindBinDir] locates the server binaries.
//
//	c, err := pgcluster.Start(ctx, pgcluster.Options{})
//	if err != nil { ... }
//	defer c.Stop()
//	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
//
// # Failure drills
//
// [Cluster.Restart] stops the server (fast or immediate, as `pg_ctl restart
// -m`) and starts it again on the same data directory and socket;
// [Cluster.Shutdown] stops it and leaves it down. [Cluster.StartStandby]
// makes a streaming replica with pg_basebackup and [Cluster.Promote]
// promotes it, for failover tests.
//
// # Citus
//
// [StartCitus] starts a coordinator and workers (each a [Cluster], also
// listening on 127.0.0.1) with Citus loaded, and prepares a template
// database on every node; [Citus.CreateDatabase] clones it on every node,
// which gives a database with the citus extension and the nodes registered.
// Citus keeps its metadata per database, and the coordinator reaches a
// database on the workers by its name.
//
// # Running as root
//
// PostgreSQL refuses to run as root. When the process runs with euid 0,
// initdb and postgres are run as the OS user "postgres" (see
// [Options.OSUser]). The temporary directory is chowned to that user.
//
// # Leftovers
//
// On Linux the postmaster gets a parent-death signal (SIGQUIT, immediate
// shutdown). If the owning process dies without calling Stop (a panic, a
// -test.timeout, SIGKILL), the server goes away with it. The server runs in
// its own process group, so signals sent to the caller's process group (or
// to the caller's own child processes) do not reach it. Temporary
// directories left behind by dead processes are removed by the next [Start]
// that uses the same base directory.
package pgcluster

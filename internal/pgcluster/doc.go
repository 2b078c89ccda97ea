// Package pgtest runs throwaway PostgreSQL servers for tests and tools.
//
// It has two halves.
//
// The cluster half ([Start], [Cluster], [Options], [FindBinDir]) has no
// dependency on package testing, so ordinary binaries can use it too (for
// example `inbox demo` and `inbox bench`). It runs initdb in a fresh
// temporary directory, starts postgres listening on a unix socket only (no
// TCP), and removes everything again in [Cluster.Stop].
//
// The test-database half ([Main], [DB], [EmptyDB], [SetMigrate]) gives each
// test its own fresh database. A test binary gets one shared cluster, started
// lazily on the first DB/EmptyDB call. A template database is migrated once
// per test binary and each DB call clones it with CREATE DATABASE ... TEMPLATE,
// which takes milliseconds. Typical use:
//
//	func TestMain(m *testing.M) {
//		pgtest.SetMigrate(schema.Migrate) // optional
//		pgtest.Main(m)
//	}
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.DB(t) // fresh, migrated, private to this test
//		...
//	}
//
// When the environment variable INBOX_TEST_DATABASE_URL is set, no cluster is
// started. The template and per-test databases are created on that server
// instead, under random names, so several test binaries can share one
// server. The role needs CREATEDB (or superuser).
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
package pgtest

// Package inboxtest is pginbox's test kit for applications: every test gets
// its own PostgreSQL database with pginbox's schema (and the application's),
// a worker runs synchronously, and assertions check what the inbox stored.
// Everything runs against a real server; nothing is mocked.
//
// An application's tests start like this:
//
//	func TestMain(m *testing.M) {
//		inboxtest.SetMigrate(migrateShop) // optional: your tables, after pginbox's
//		inboxtest.Main(m)
//	}
//
//	func TestOrderCreated(t *testing.T) {
//		t.Parallel()
//		pool := inboxtest.Pool(t) // a fresh database, private to this test
//		client, _ := inbox.NewClient(pool, inbox.Config{})
//		res, _ := client.Accept(ctx, msg)
//		inboxtest.Drain(t, worker) // handles everything due, synchronously
//		inboxtest.RequireStatus(t, pool, msg.Identity, inbox.StatusCompleted)
//	}
//
// # Databases
//
// [Database] and [Pool] clone, in milliseconds, a template database migrated
// once per test binary (pginbox's schema, then the [SetMigrate] function).
// [EmptyDatabase] has no schema, for migration tests.
// [NewDatabase] serves runnable examples, which get no testing.TB.
//
// By default the databases live on a throwaway cluster that the kit starts
// from the installed PostgreSQL server binaries on first use: initdb in a
// temporary directory, a unix socket only (no TCP), fsync off. [Main] stops
// it. The binaries are found on PATH, through pg_config, or in
// /usr/lib/postgresql/*/bin; no running server is needed.
//
// With INBOX_TEST_DATABASE_URL set ([EnvDatabaseURL]), no cluster is started:
// the template and the test databases are created on that server, under
// random names, so several test binaries can share it. Its role needs
// CREATEDB (or superuser).
//
// # Citus
//
// [CitusEmptyDatabase] gives a test its own database on a throwaway Citus
// cluster (a coordinator and two workers on 127.0.0.1): the citus extension
// on every node, the workers registered, no schema. The kit starts that
// cluster on first use; it needs Citus installed in the PostgreSQL server
// (citus.so), and without it such tests are skipped, or fail when CI=true.
// [CitusDatabase] gives one with pginbox's Citus schema; [SetState] works on
// both.
//
// # Assertions
//
// [RequireReceipt], [RequireStatus] and [RequireNoReceipt] look a receipt up
// by identity and fail the test with what they found: status, attempts and
// last error. [WaitForStatus] polls a receipt until a running worker moves it
// to a status. [RequireEmitted] and [Emitted] read the outbox events a
// receipt's handler emitted (outbox.Emit in its transaction) and committed.
package inboxtest

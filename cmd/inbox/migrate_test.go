package main

import (
	"bytes"
	"context"
	"fmt"
	"os/user"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/schema"
)

// TestMigrateDownToZero: a rollback to version 0 drops every pginbox table, so
// it is refused without --yes, with the tables and their row counts; with
// --yes it drops exactly the tables it named.
func TestMigrateDownToZero(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	ctx := context.Background()
	db := map[string]string{"DATABASE_URL": f.dsn, "USER": "tester"}
	code, _, _ := runIn(t, db, "requeue", f.dead.String(), "--version", "3", "--reason", "one audit row")
	is.Equal(code, exitOK)

	code, stdout, stderr := runIn(t, db, "migrate", "down", "--to", "0")
	is.Equal(code, exitUsage)
	is.Equal(stdout, "")
	is.True(strings.Contains(stderr, fmt.Sprintf("refusing to roll back from version %d to 0 without --yes: it drops pginbox_receipts (4 rows)", schema.Version)))
	is.True(strings.Contains(stderr, "pginbox_audit (1 row)"))
	is.True(strings.Contains(stderr, "and nothing of it can be recovered; nothing changed"))
	code, _, _ = runIn(t, db, "stats")
	is.Equal(code, exitOK) // still at the current version

	// Step by step (on a database that version 1 can represent), the last
	// step is refused too; with --yes exactly the tables named are dropped.
	dsn := inboxtest.Database(t)
	pool, err := pgxpool.New(ctx, dsn)
	is.NoErr(err)
	defer pool.Close()
	db = map[string]string{"DATABASE_URL": dsn}
	for v := schema.Version; v > 1; v-- {
		code, _, _ = runIn(t, db, "migrate", "down")
		is.Equal(code, exitOK)
	}
	code, _, stderr = runIn(t, db, "migrate", "down", "--json")
	is.Equal(code, exitUsage)
	is.True(strings.Contains(stderr, "refusing to roll back from version 1 to 0 without --yes: it drops pginbox_receipts (0 rows), and"))

	tables := func() []string {
		rows, err := pool.Query(ctx, "SELECT tablename FROM pg_tables WHERE tablename LIKE 'pginbox%' ORDER BY 1")
		is.NoErr(err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			is.NoErr(rows.Scan(&n))
			out = append(out, n)
		}
		is.NoErr(rows.Err())
		return out
	}
	code, _, _ = runIn(t, db, "migrate", "up")
	is.Equal(code, exitOK)
	before := tables()
	code, stdout, _ = runIn(t, db, "migrate", "down", "--to", "0", "--yes")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "schema at version 0"))
	after := tables()
	var dropped []string
	for _, tb := range before {
		if !slices.Contains(after, tb) {
			dropped = append(dropped, tb)
		}
	}
	is.Equal(dropped, slices.Sorted(slices.Values(schemaTables))) // the refusal names what is dropped

	// Nothing left to drop: down to 0 has nothing to refuse.
	code, stdout, _ = runIn(t, db, "migrate", "down", "--to", "0")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "nothing to do"))
}

// A migration that removes rows says so: the upgrade to v7 removes a work row
// of another scope than its receipt's, and `inbox migrate up` prints the
// migration's notice on stderr.
func TestMigratePrintsWhatAMigrationRemoved(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	db := map[string]string{"DATABASE_URL": dsn}
	code, _, _ := runIn(t, db, "migrate", "down", "--to", "6")
	is.Equal(code, exitOK)
	pool, err := pgxpool.New(ctx, dsn)
	is.NoErr(err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
		VALUES (gen_random_uuid(), 'tenant', 'a', 'c', 1)`)
	is.NoErr(err)

	code, stdout, stderr := runIn(t, db, "migrate", "up")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "applied 00007_scope_keys.sql"))
	is.True(strings.Contains(stderr, "notice: pginbox v7: removed 1 work row(s) whose scope differs from their receipt's"))
}

// A rollback that fails part way says which versions it did roll back.
func TestMigrateDownReportsTheStepsBeforeAFailure(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	pool, err := pgxpool.New(ctx, dsn)
	is.NoErr(err)
	defer pool.Close()
	_, err = pool.Exec(ctx, "CREATE VIEW app_outbox_ids AS SELECT id FROM pginbox_outbox") // v5's down step drops the outbox
	is.NoErr(err)

	code, _, stderr := runIn(t, map[string]string{"DATABASE_URL": dsn}, "migrate", "down", "--to", "4")
	is.True(code != exitOK)
	for v := schema.Version; v > 5; v-- {
		is.True(strings.Contains(stderr, fmt.Sprintf("rolled back version %d before the failure", v)))
	}
	is.True(!strings.Contains(stderr, "rolled back version 5"))
}

// TestMigrateCitus: --citus applies the Citus line on a coordinator, with
// --colocate-with an application table's colocation group; the single-node
// line then refuses the distributed tables and says to add --citus.
func TestMigrateCitus(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.CitusEmptyDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	is.NoErr(err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `CREATE TABLE orders (tenant_id text, id bigint, PRIMARY KEY (tenant_id, id));
		SELECT create_distributed_table('orders', 'tenant_id')`)
	is.NoErr(err)
	db := map[string]string{"DATABASE_URL": dsn}

	code, _, stderr := runIn(t, db, "migrate", "up", "--colocate-with", "orders")
	is.Equal(code, exitUsage)
	is.True(strings.Contains(stderr, "--colocate-with applies to up --citus only"))
	code, _, stderr = runIn(t, db, "migrate", "up", "--citus", "--colocate-with", "nosuch")
	is.Equal(code, exitError)
	is.True(strings.Contains(stderr, `colocating with "nosuch": no distributed table of that name`))

	code, stdout, stderr := runIn(t, db, "migrate", "up", "--citus", "--colocate-with", "orders")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "applied 00007_citus.sql"))
	is.True(strings.Contains(stdout, fmt.Sprintf("schema at version %d: up to date", schema.Version)))
	var groups int
	is.NoErr(pool.QueryRow(ctx, `SELECT count(DISTINCT colocationid) FROM pg_dist_partition
		WHERE logicalrelid::text IN ('orders', 'pginbox_receipts', 'pginbox_work', 'pginbox_audit', 'pginbox_outbox')`).Scan(&groups))
	is.Equal(groups, 1)

	code, stdout, _ = runIn(t, db, "migrate", "status", "--citus")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "00007_citus.sql"))
	code, _, stderr = runIn(t, db, "migrate", "up")
	is.Equal(code, exitError)
	is.True(strings.Contains(stderr, "distributed by Citus: migrate them with the Citus line"))
}

// signalWriter keeps what is written and closes seen once it contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Workers may hold the tables while `inbox migrate up` runs: a migration
// that finds one busy gives way, says so on stderr, and runs again once it is
// free.
func TestMigrateGivesWayToABusyTable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	db := map[string]string{"DATABASE_URL": dsn}
	code, _, _ := runIn(t, db, "migrate", "down", "--to", "8")
	is.Equal(code, exitOK)
	pool, err := pgxpool.New(ctx, dsn)
	is.NoErr(err)
	defer pool.Close()
	// A worker's statement on pginbox_work, in flight.
	holder, err := pool.Begin(ctx)
	is.NoErr(err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, "LOCK TABLE pginbox_work IN ROW EXCLUSIVE MODE")
	is.NoErr(err)

	var stdout bytes.Buffer
	stderr := &signalWriter{want: "migration 9 gave way", seen: make(chan struct{})}
	e := &env{stdout: &stdout, stderr: stderr, getenv: func(k string) string { return db[k] }, currentUser: user.Current}
	done := make(chan int, 1)
	go func() { done <- e.run(ctx, []string{"migrate", "up"}) }()
	select {
	case <-stderr.seen:
	case code := <-done:
		t.Fatalf("migrate up ended (%d) without giving way: %s%s", code, stdout.String(), stderr.String())
	}
	is.NoErr(holder.Rollback(ctx))
	is.Equal(<-done, exitOK)
	is.True(strings.Contains(stderr.String(), "migration 9 gave way to transactions holding pginbox's tables (1 so far, docs/UPGRADING.md): trying again, waiting up to 500ms for the locks"))
	is.True(strings.Contains(stdout.String(), "applied 00009_ordering.sql"))
	is.True(strings.Contains(stdout.String(), fmt.Sprintf("schema at version %d", schema.Version)))
}

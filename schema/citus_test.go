package schema_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

func queryText(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) string {
	t.Helper()
	var s string
	if err := q.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// distribution lists pginbox's tables with their distribution method,
// column and colocation group, one "table method column group" line each.
func distribution(t *testing.T, pool *pgxpool.Pool, extra ...string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT logicalrelid::text || ' ' || partmethod::text || ' ' || column_to_column_name(logicalrelid, partkey) || ' ' || colocationid
		FROM pg_dist_partition
		WHERE logicalrelid::text = ANY ($1::text[])
		ORDER BY 1`, append(slices.Clone(schema.TenancyTables), extra...))
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameGroup checks that every line of distribution's output is hash
// distributed by the named column and that all share one colocation group.
func sameGroup(t *testing.T, lines []string, want int) {
	t.Helper()
	groups := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		if f[1] != "h" {
			t.Errorf("%s: not hash distributed", l)
		}
		groups[f[3]] = true
	}
	if len(lines) != want || len(groups) != 1 {
		t.Fatalf("want %d tables in one colocation group, got %q", want, lines)
	}
}

// The Citus line: versions 1 to 6 are the single-node files, 7 is the Citus
// twin; applied to a Citus coordinator it leaves the schema at Version with
// every pginbox table distributed by scope_id, all in one colocation group.
func TestMigrateCitus(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()

	var files []string
	for _, pattern := range []string{"*.sql", "*.go"} {
		got, err := fs.Glob(schema.CitusFS(), pattern)
		is.NoErr(err)
		files = append(files, got...)
	}
	is.Equal(files, []string{"00001_receipts_v1.sql", "00002_receipts_v2.sql", "00003_payload_json.sql",
		"00004_work_queue.sql", "00005_outbox.sql", "00006_tenancy.sql", "citus/00007_citus.sql", "00008_scope_due.sql",
		"00009_ordering.sql", "00010_accept_function.sql", "00011_accept_function_plans.sql", "00012_receipts_fillfactor.sql",
		"00013_node_sessions.sql"})

	dsn := inboxtest.CitusEmptyDatabase(t)
	applied, err := schema.MigrateCitus(ctx, dsn, schema.CitusOptions{})
	is.NoErr(err)
	is.Equal(applied, versions(1, schema.Version))
	db, pool := open(t, dsn)
	is.NoErr(schema.Check(ctx, pool))

	lines := distribution(t, pool)
	sameGroup(t, lines, 4)
	for _, l := range lines {
		is.Equal(strings.Fields(l)[2], "scope_id")
	}
	// Storage settings reach every shard (v12's fillfactor).
	is.Equal(queryText(t, pool, `SELECT string_agg(DISTINCT result, ';') FROM run_command_on_shards('pginbox_receipts',
		$$SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = '%s'::regclass$$)`), "fillfactor=50")

	// Status names the twin; applying again does nothing.
	m, err := schema.NewCitusMigrator(db)
	is.NoErr(err)
	st, err := m.Status(ctx)
	is.NoErr(err)
	is.Equal(path.Base(st[6].Source), "00007_citus.sql")
	applied, err = schema.MigrateCitus(ctx, dsn, schema.CitusOptions{})
	is.NoErr(err)
	is.Equal(len(applied), 0)

	// The single-node line refuses the distributed tables.
	_, err = migrator(t, db).DownTo(ctx, 6)
	is.True(errors.Is(err, schema.ErrMigrationLine))
	is.True(strings.Contains(err.Error(), "--citus"))

	// The Citus line does not roll back past 7 (Citus cannot make tables
	// with identity columns local again): refused before anything changes.
	_, err = m.DownTo(ctx, 6)
	is.True(err != nil && strings.Contains(err.Error(), "cannot roll back the Citus line below version 7"))
	is.True(strings.Contains(err.Error(), "pg_dump --data-only")) // the hint says the way out
	sameGroup(t, distribution(t, pool), 4)
	is.NoErr(schema.Check(ctx, pool))
}

// The Citus line refuses a database without Citus; a database the
// single-node line migrated to 7 is refused too, with the way back.
func TestMigrateCitusWrongLine(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	_, err := schema.MigrateCitus(ctx, inboxtest.EmptyDatabase(t), schema.CitusOptions{})
	if !errors.Is(err, schema.ErrMigrationLine) {
		t.Fatalf("want ErrMigrationLine, got %v", err)
	}
	is.True(strings.Contains(err.Error(), "CREATE EXTENSION citus"))

	dsn := inboxtest.CitusEmptyDatabase(t)
	db, pool := open(t, dsn)
	_, err = migrator(t, db).Up(ctx)
	is.NoErr(err) // local tables on the coordinator: a single-node line is allowed
	_, err = schema.MigrateCitus(ctx, dsn, schema.CitusOptions{})
	is.True(errors.Is(err, schema.ErrMigrationLine))
	is.True(strings.Contains(err.Error(), "inbox migrate down --to 6"))
	_, err = migrator(t, db).DownTo(ctx, 6)
	is.NoErr(err)
	applied, err := schema.MigrateCitus(ctx, dsn, schema.CitusOptions{})
	is.NoErr(err)
	is.Equal(applied, versions(7, schema.Version))
	sameGroup(t, distribution(t, pool), 4)
}

// An application table distributed by its tenant column before pginbox is
// migrated: ColocateWith puts pginbox's tables in its colocation group. A
// table that cannot share the group is refused before anything changes.
func TestMigrateCitusColocateWith(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.CitusEmptyDatabase(t)
	_, pool := open(t, dsn)
	_, err := pool.Exec(ctx, `
		CREATE TABLE orders (tenant_id text, id bigint, PRIMARY KEY (tenant_id, id));
		SELECT create_distributed_table('orders', 'tenant_id', shard_count => 6);
		CREATE TABLE by_number (n bigint PRIMARY KEY);
		SELECT create_distributed_table('by_number', 'n');
		CREATE TABLE plain (id text PRIMARY KEY);`)
	is.NoErr(err)

	for table, want := range map[string]string{
		"nosuch":    "no distributed table of that name",
		"plain":     "no distributed table of that name",
		"by_number": "distributed by a bigint column",
	} {
		_, err := schema.MigrateCitus(ctx, dsn, schema.CitusOptions{ColocateWith: table})
		is.True(err != nil && strings.Contains(err.Error(), want)) // refused with the reason
		is.Equal(queryText(t, pool, `SELECT (to_regclass('pginbox_receipts') IS NULL)::text`), "true")
	}

	_, err = schema.MigrateCitus(ctx, dsn, schema.CitusOptions{ColocateWith: "orders"})
	is.NoErr(err)
	lines := distribution(t, pool, "orders")
	sameGroup(t, lines, 5)
	is.Equal(queryText(t, pool, `SELECT count(*)::text FROM pg_dist_shard WHERE logicalrelid = 'pginbox_work'::regclass`), "6")
}

// Without ColocateWith, an application table joins pginbox's group with
// colocate_with => 'pginbox_receipts'; a tenant's business rows and its
// receipts then share a shard. The global scope (scope_id ”) lives in the
// one shard get_shard_id_for_distribution_column names: its rows are in that
// shard's table on that shard's worker, and in no other shard.
func TestCitusColocatedTableAndGlobalShard(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.CitusDatabase(t)
	_, pool := open(t, dsn)
	_, err := pool.Exec(ctx, `
		CREATE TABLE orders (tenant_id text, id bigint, PRIMARY KEY (tenant_id, id));
		SELECT create_distributed_table('orders', 'tenant_id', colocate_with => 'pginbox_receipts');`)
	is.NoErr(err)
	sameGroup(t, distribution(t, pool, "orders"), 5)

	insert := func(kind, scope, msg string) {
		_, err := pool.Exec(ctx, `
			INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type,
				schema_version, fingerprint, payload, status, completed_at)
			VALUES ($1, $2, $3, 's', 'c', $4, 'e', 1, decode(repeat('00', 32), 'hex'), '{}', 'COMPLETED', now())`,
			inboxtype.New(), kind, scope, msg)
		is.NoErr(err)
	}
	for i := range 5 {
		insert("global", "", fmt.Sprint("g", i))
		insert("tenant", fmt.Sprint("tenant-", i), fmt.Sprint("t", i))
	}

	// Physical placement: count the global rows in every shard of
	// pginbox_receipts, on the worker that holds it.
	globalShard := queryText(t, pool, `SELECT get_shard_id_for_distribution_column('pginbox_receipts', '')::text`)
	rows, err := pool.Query(ctx, `
		SELECT s.shardid::text, p.nodename, p.nodeport
		FROM pg_dist_shard s JOIN pg_dist_placement pl USING (shardid) JOIN pg_dist_node p USING (groupid)
		WHERE s.logicalrelid = 'pginbox_receipts'::regclass`)
	is.NoErr(err)
	type placement struct {
		Shard, Host string
		Port        int
	}
	places, err := pgx.CollectRows(rows, pgx.RowToStructByPos[placement])
	is.NoErr(err)
	found := map[string]string{}
	for _, p := range places {
		cfg, err := pgx.ParseConfig(dsn)
		is.NoErr(err)
		cfg.Host, cfg.Port = p.Host, uint16(p.Port)
		conn, err := pgx.ConnectConfig(ctx, cfg)
		is.NoErr(err)
		found[p.Shard] = queryText(t, conn, `SELECT count(*)::text FROM pginbox_receipts_`+p.Shard+` WHERE scope_id = ''`)
		conn.Close(ctx)
	}
	for shard, n := range found {
		if shard == globalShard {
			is.Equal(n, "5")
		} else {
			is.Equal(n, "0")
		}
	}
	is.Equal(len(found), 32) // Citus's default shard count
}

// Row-level security on the distributed tables: a restricted role sees its
// tenant's rows only, in a query routed to one shard and in one fanned out
// to all, once the scope setting reaches the workers: SET LOCAL with
// citus.propagate_set_commands = 'local'. Without propagation the workers
// see no scope and so no rows.
func TestCitusTenancyIsolation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.CitusDatabase(t)
	_, pool := open(t, dsn)
	for i := range 4 {
		for _, tenant := range []string{"tenant-a", "tenant-b"} {
			_, err := pool.Exec(ctx, `
				INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type,
					schema_version, fingerprint, payload, status, completed_at)
				VALUES ($1, 'tenant', $2, 's', 'c', $3, 'e', 1, decode(repeat('00', 32), 'hex'), '{}', 'COMPLETED', now())`,
				inboxtype.New(), tenant, fmt.Sprint("m", i))
			is.NoErr(err)
		}
	}
	role := "app_" + strings.ToLower(inboxtype.New().String()[:8])
	stmts, err := schema.GrantStatements(role, false)
	is.NoErr(err)
	_, err = pool.Exec(ctx, "CREATE ROLE "+role+" LOGIN")
	is.NoErr(err)
	t.Cleanup(func() {
		pool.Exec(context.Background(), "REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "+role)
	})
	for _, s := range stmts {
		_, err := pool.Exec(ctx, s)
		is.NoErr(err)
	}
	is.NoErr(schema.EnableTenancy(ctx, pool))

	cfg, err := pgx.ParseConfig(dsn)
	is.NoErr(err)
	cfg.User = role
	conn, err := pgx.ConnectConfig(ctx, cfg)
	is.NoErr(err)
	defer conn.Close(ctx)
	count := func(propagate bool, tenant, where string) string {
		tx, err := conn.Begin(ctx)
		is.NoErr(err)
		defer tx.Rollback(ctx)
		if propagate {
			_, err = tx.Exec(ctx, "SET LOCAL citus.propagate_set_commands = 'local'")
			is.NoErr(err)
		}
		_, err = tx.Exec(ctx, "SET LOCAL pginbox.tenant = "+pgQuote(tenant))
		is.NoErr(err)
		return queryText(t, tx, "SELECT count(*)::text FROM pginbox_receipts "+where)
	}
	is.Equal(count(true, "tenant-a", ""), "4")                            // fan-out: only tenant-a's rows
	is.Equal(count(true, "tenant-a", "WHERE scope_id = 'tenant-a'"), "4") // routed
	is.Equal(count(true, "tenant-a", "WHERE scope_id = 'tenant-b'"), "0") // routed to B's shard: nothing
	is.Equal(count(true, "tenant-b", ""), "4")
	is.Equal(count(false, "tenant-a", ""), "0") // the workers never saw the scope
}

func pgQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

package inboxtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/pgcluster"
)

// envCitusBinDir points the Citus cluster at other server binaries, when this
// binary runs as the child of TestCitusNotInstalled.
const envCitusBinDir = "INBOXTEST_TEST_CITUS_BINDIR"

// taskCount returns the "Task Count" of a Citus plan.
func taskCount(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), "EXPLAIN (COSTS OFF) "+sql, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	plan := strings.Join(lines, "\n")
	m := regexp.MustCompile(`Task Count: (\d+)`).FindStringSubmatch(plan)
	if m == nil {
		t.Fatalf("EXPLAIN %s: no Citus task count in the plan:\n%s", sql, plan)
	}
	return m[1]
}

// The smoke test of the Citus cluster: an application table distributed by
// tenant, a pginbox-like table colocated with it, a query for one tenant
// routed to one shard, and a query over all tenants fanned out to every
// shard, both with the right answers.
func TestCitusSmoke(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	conn := connect(t, inboxtest.CitusEmptyDatabase(t))
	is.True(strings.HasPrefix(queryString(t, conn, "SELECT current_database()"), "t_testcitussmoke_"))
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM citus_get_active_worker_nodes()"), "2")

	_, err := conn.Exec(t.Context(), `
		CREATE TABLE orders (tenant_id text, order_id text, total_cents bigint NOT NULL, PRIMARY KEY (tenant_id, order_id));
		SELECT create_distributed_table('orders', 'tenant_id');
		CREATE TABLE receipts (scope_id text, id bigint, order_id text NOT NULL, status text NOT NULL, PRIMARY KEY (scope_id, id));
		SELECT create_distributed_table('receipts', 'scope_id', colocate_with => 'orders');
		INSERT INTO orders SELECT 'tenant' || (g % 10), 'o' || g, g FROM generate_series(1, 100) g;
		INSERT INTO receipts SELECT 'tenant' || (g % 10), g, 'o' || g, 'completed' FROM generate_series(1, 100) g;`)
	is.NoErr(err)
	is.Equal(queryString(t, conn, `SELECT count(DISTINCT colocationid)::text FROM pg_dist_partition WHERE logicalrelid IN ('orders'::regclass, 'receipts'::regclass)`), "1")
	is.Equal(queryString(t, conn, `SELECT count(DISTINCT nodeport)::text FROM citus_shards`), "2") // shards on both workers

	oneTenant := `SELECT sum(o.total_cents)::text FROM orders o JOIN receipts r ON r.scope_id = o.tenant_id AND r.order_id = o.order_id
		WHERE o.tenant_id = $1 AND r.status = 'completed'`
	is.Equal(taskCount(t, conn, oneTenant, "tenant3"), "1") // router: one shard
	var sum string
	is.NoErr(conn.QueryRow(t.Context(), oneTenant, "tenant3").Scan(&sum))
	is.Equal(sum, "480") // 3 + 13 + ... + 93

	allTenants := `SELECT sum(o.total_cents)::text FROM orders o JOIN receipts r ON r.scope_id = o.tenant_id AND r.order_id = o.order_id`
	shards := queryString(t, conn, "SELECT shard_count::text FROM citus_tables WHERE table_name = 'orders'::regclass")
	is.Equal(taskCount(t, conn, allTenants), shards) // one task per shard
	is.Equal(queryString(t, conn, allTenants), "5050")
}

// Every CitusEmptyDatabase is its own database on every node, and it is
// gone from every node when its test ends.
func TestCitusDatabasesIsolated(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var first string
	t.Run("first", func(t *testing.T) {
		conn := connect(t, inboxtest.CitusEmptyDatabase(t))
		first = queryString(t, conn, "SELECT current_database()")
		_, err := conn.Exec(t.Context(), "CREATE TABLE private (k text PRIMARY KEY); SELECT create_distributed_table('private', 'k')")
		is.NoErr(err)
		is.Equal(queryString(t, conn, "SELECT count(*)::text FROM run_command_on_all_nodes($$SELECT to_regclass('private') IS NOT NULL$$) WHERE result = 't'"), "3")
	})
	conn := connect(t, inboxtest.CitusEmptyDatabase(t))
	is.True(queryString(t, conn, "SELECT current_database()") != first)
	is.Equal(queryString(t, conn, "SELECT count(*)::text FROM pg_dist_partition"), "0") // no table of the other database
	// The first test's database was dropped on the coordinator and both workers.
	is.Equal(queryString(t, conn, fmt.Sprintf(
		"SELECT string_agg(result, ',') FROM run_command_on_all_nodes($$SELECT count(*) FROM pg_database WHERE datname = '%s'$$)", first)), "0,0,0")
}

// Without Citus in the server, a Citus test is skipped with a line saying
// how to install it, and fails when CI=true.
func TestCitusNotInstalled(t *testing.T) {
	if os.Getenv(envCitusBinDir) != "" {
		t.Skip("runs only as the parent")
	}
	t.Parallel()
	is := is.New(t)
	bin := fakeBinDirWithoutCitus(t)
	out, err := runChild(t, "^TestCitusSmoke$", envCitusBinDir+"="+bin, "CI=")
	is.NoErr(err)
	is.True(strings.Contains(out, "--- SKIP: TestCitusSmoke"))
	is.True(strings.Contains(out, "inboxtest: skipping: this test needs Citus: "))
	is.True(strings.Contains(out, "build Citus 13.2 from source"))

	out, err = runChild(t, "^TestCitusSmoke$", envCitusBinDir+"="+bin, "CI=true")
	is.True(err != nil)
	is.True(strings.Contains(out, "--- FAIL: TestCitusSmoke"))
	is.True(strings.Contains(out, "Citus is not installed in this PostgreSQL server"))
}

// fakeBinDirWithoutCitus returns a directory with the server binaries and a
// pg_config whose library directory has no citus.so.
func fakeBinDirWithoutCitus(t *testing.T) string {
	t.Helper()
	real, err := pgcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if err := os.Symlink(filepath.Join(real, name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	script := "#!/bin/sh\necho " + t.TempDir() + "\n"
	if err := os.WriteFile(filepath.Join(bin, "pg_config"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

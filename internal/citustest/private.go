package citustest

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/schema"
)

// Private starts a Citus cluster of the test's own (for a test that stops a
// node: the shared one must stay up) with one database migrated with
// pginbox's Citus line, and returns the cluster and the database's
// connection string. Outside CI it skips when Citus is not installed.
func Private(t testing.TB) (*pgcluster.Citus, string) {
	t.Helper()
	ctx := t.Context()
	c, err := pgcluster.StartCitus(ctx, pgcluster.CitusOptions{})
	if errors.Is(err, pgcluster.ErrCitusNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("skipping: this test needs Citus: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	const dbname = "private"
	if err := c.CreateDatabase(ctx, dbname); err != nil {
		t.Fatal(err)
	}
	dsn := c.ConnString(dbname)
	if _, err := schema.MigrateCitus(ctx, dsn, schema.CitusOptions{}); err != nil {
		t.Fatal(err)
	}
	return c, dsn
}

// TenantOnEachWorker returns one tenant per worker node of c whose shard of
// table (in Private's database) is on that node, in c.Workers' order.
func TenantOnEachWorker(t testing.TB, c *pgcluster.Citus, table string) []string {
	t.Helper()
	each := TenantsOnEachWorker(t, c, table, 1)
	tenants := make([]string, len(each))
	for i, ts := range each {
		tenants[i] = ts[0]
	}
	return tenants
}

// TenantsOnEachWorker returns, per worker node of c, n tenant IDs whose
// shard of table (in database "private") is on that node.
func TenantsOnEachWorker(t testing.TB, c *pgcluster.Citus, table string, n int) [][]string {
	t.Helper()
	tenants := make([][]string, len(c.Workers))
	missing := n * len(c.Workers)
	for i := 0; missing > 0; i++ {
		if i == 1000*n {
			t.Fatalf("not %d tenants found on every worker node of %d after %d tries", n, len(c.Workers), i)
		}
		tenant := fmt.Sprintf("tenant-%03d", i)
		_, node, err := c.ShardOf(t.Context(), "private", table, tenant)
		if err != nil {
			t.Fatal(err)
		}
		for w, nd := range c.Workers {
			if nd == node && len(tenants[w]) < n {
				tenants[w] = append(tenants[w], tenant)
				missing--
			}
		}
	}
	return tenants
}

package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/schema"
)

// The Citus cluster is separate from the plain one: started on the first
// Citus request, stopped by Main.
var (
	citusOnce sync.Once
	citusVal  *pgcluster.Citus
	citusErr  error
	citusOpts pgcluster.CitusOptions // tests of the kit change it

	citusTmplOnce sync.Once
	citusTmplName string
	citusTmplErr  error
)

func sharedCitus() (*pgcluster.Citus, error) {
	citusOnce.Do(func() {
		citusVal, citusErr = pgcluster.StartCitus(context.Background(), citusOpts)
		if citusErr != nil {
			citusErr = fmt.Errorf("inboxtest: starting a throwaway Citus cluster: %w", citusErr)
		}
	})
	return citusVal, citusErr
}

// CitusEmptyDatabase returns a connection string for a new database on a
// throwaway Citus cluster, private to the test: the citus extension created
// on every node and the workers registered on the coordinator, and no
// schema. The connection string is the coordinator's. The database is
// dropped on every node when the test ends.
//
// The cluster is a coordinator and two workers on 127.0.0.1, started from
// the installed server binaries on first use (about 5 s), each with fsync
// off, and stopped by [Main]; each database is a clone of a template made
// then. INBOX_TEST_DATABASE_URL does not apply.
//
// Without Citus installed in the PostgreSQL server, the test is skipped with
// a line that says how to install it; when the CI environment variable is
// "true" it fails instead.
func CitusEmptyDatabase(t testing.TB) string {
	t.Helper()
	c := citusCluster(t)
	return createCitusDatabase(t, c, "")
}

// citusCluster returns the shared Citus cluster, skipping the test (failing
// it in CI) when Citus is not installed.
func citusCluster(t testing.TB) *pgcluster.Citus {
	t.Helper()
	if !mainUsed.Load() {
		hintOnce.Do(func() {
			fmt.Fprintln(os.Stderr, "inboxtest: hint: add `func TestMain(m *testing.M) { inboxtest.Main(m) }` to this package's tests, "+
				"so the throwaway clusters are stopped when the tests end")
		})
	}
	c, err := sharedCitus()
	if errors.Is(err, pgcluster.ErrCitusNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("inboxtest: skipping: this test needs Citus: %v", err)
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	return c
}

// createCitusDatabase creates the test's database on every node, a clone
// of tmpl ("" for the empty template), dropped when the test ends.
func createCitusDatabase(t testing.TB, c *pgcluster.Citus, tmpl string) string {
	t.Helper()
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if tmpl == "" {
		err = c.CreateDatabase(ctx, name)
	} else {
		err = c.CreateDatabaseFrom(ctx, name, tmpl)
	}
	if err != nil {
		t.Fatalf("inboxtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.DropDatabase(ctx, name); err != nil {
			t.Logf("inboxtest: dropping Citus test database %s: %v", name, err)
		}
	})
	return c.ConnString(name)
}

// CitusDatabase is [CitusEmptyDatabase] with pginbox's schema on it: a
// new database on the throwaway Citus cluster, private to the test,
// migrated with the Citus line (schema.MigrateCitus with the default
// options: pginbox's tables distributed by scope_id in Citus's default
// colocation group for text columns) and no rows. It is a clone of a
// template migrated once per test binary (every node's copy of it). The
// [SetMigrate] function does not run here: a test creates and distributes
// its own tables (create_distributed_table('orders', 'tenant_id',
// colocate_with => 'pginbox_receipts') colocates one with pginbox).
func CitusDatabase(t testing.TB) string {
	t.Helper()
	c := citusCluster(t)
	tmpl, err := citusTemplate(c)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return createCitusDatabase(t, c, tmpl)
}

// citusTemplate migrates the Citus template database once per test binary.
func citusTemplate(c *pgcluster.Citus) (string, error) {
	citusTmplOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		name := "pginbox_citus_tmpl_" + randomHex(8)
		if err := c.CreateDatabase(ctx, name); err != nil {
			citusTmplErr = fmt.Errorf("inboxtest: %w", err)
			return
		}
		if _, err := schema.MigrateCitus(ctx, c.ConnString(name), schema.CitusOptions{}); err != nil {
			citusTmplErr = fmt.Errorf("inboxtest: applying pginbox's Citus schema to the template database %s: %w", name, err)
		} else if err := c.CloseTemplate(ctx, name); err != nil {
			citusTmplErr = fmt.Errorf("inboxtest: closing the Citus template database %s: %w", name, err)
		}
		if citusTmplErr != nil {
			c.DropDatabase(context.WithoutCancel(ctx), name)
			return
		}
		citusTmplName = name
	})
	return citusTmplName, citusTmplErr
}

// teardownCitus stops the Citus cluster, if it was started.
func teardownCitus() error {
	ran := false
	citusOnce.Do(func() {
		ran = true
		citusErr = errors.New("inboxtest: a Citus database was requested after inboxtest.Main finished")
	})
	if ran || citusVal == nil {
		return nil
	}
	return citusVal.Stop()
}

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
)

// The Citus cluster is separate from the plain one: started on the first
// Citus request, stopped by Main.
var (
	citusOnce sync.Once
	citusVal  *pgcluster.Citus
	citusErr  error
	citusOpts pgcluster.CitusOptions // tests of the kit change it
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
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.CreateDatabase(ctx, name); err != nil {
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

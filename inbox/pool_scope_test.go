package inbox_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// A scope set at session level outlives its transaction and reaches the next
// borrower of the pooled connection, who then sees that tenant's rows without
// applying any scope. ResetScopeOnRelease clears it on release; it keeps a
// hook the pool already had.
func TestResetScopeOnReleaseClearsASessionScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	td := newTenancyDB(t)
	acceptAll(t, newClient(t, td.app, inbox.Config{}), tenantMsg(inbox.Tenant("a"), "a-1"))

	var earlier atomic.Int32
	for _, tc := range []struct {
		name  string
		reset bool
		want  int // a's receipts the next borrower sees without a scope
	}{{"without the hook", false, 1}, {"with the hook", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			pool := poolFor(t, td.dsn, func(c *pgxpool.Config) {
				c.ConnConfig.User = td.appRole
				c.MaxConns = 1 // the next borrower gets the same connection
				c.AfterRelease = func(*pgx.Conn) bool { earlier.Add(1); return true }
				if tc.reset {
					inbox.ResetScopeOnRelease(c)
				}
			})
			if _, err := pool.Exec(ctx, "SET pginbox.tenant = 'a'"); err != nil {
				t.Fatal(err)
			}
			var seen int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts").Scan(&seen); err != nil {
				t.Fatal(err)
			}
			if seen != tc.want {
				t.Errorf("the next borrower sees %d of a's receipts, want %d", seen, tc.want)
			}
		})
	}
	if earlier.Load() < 4 {
		t.Errorf("the pool's own AfterRelease ran %d times, want every release", earlier.Load())
	}
}

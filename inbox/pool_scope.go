package inbox

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
)

// scopeResetTimeout bounds the reset of a released connection; one that
// does not answer in time is closed instead of reused.
const scopeResetTimeout = 5 * time.Second

// ResetScopeOnRelease installs a hook on cfg (its AfterRelease, after any
// hook already there) that clears pginbox.tenant and pginbox.global whenever
// a connection returns to the pool. Call it before pgxpool.NewWithConfig.
//
// pginbox itself never needs it: ApplyScope and everything pginbox runs set
// the scope for one transaction only. It is for applications whose own code
// may set the scope at session level (SET pginbox.tenant = ..., without
// LOCAL, or set_config(..., false)), which would otherwise reach the next
// borrower of the connection: under row-level security, another tenant's
// request would see that tenant's rows. The reset costs one round trip per
// release, off the releasing goroutine (pgxpool runs the hook in its own).
// A connection whose reset fails is closed, never reused.
//
// It cannot help behind PgBouncer in transaction mode, where the next
// transaction may run on another server connection: there, never set the
// scope at session level (docs/TENANCY.md).
func ResetScopeOnRelease(cfg *pgxpool.Config) {
	prev := cfg.AfterRelease
	cfg.AfterRelease = func(c *pgx.Conn) bool {
		if prev != nil && !prev(c) {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), scopeResetTimeout)
		defer cancel()
		return db.New(c).ScopeReset(ctx) == nil
	}
}

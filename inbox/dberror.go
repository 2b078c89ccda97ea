package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/schema"
)

// bookkeepingTimeout bounds the worker's and admin's own short statements
// (claims, completions, failures, releases, commits) that must not inherit a
// caller's or handler's context: an interrupted bookkeeping write would leave
// a receipt to lease expiry.
const bookkeepingTimeout = 30 * time.Second

// certainlyNotCommitted reports whether a failed COMMIT, or a failed statement
// that was its own transaction, certainly did not commit: the server answered
// with an error (not a FATAL one), or nothing was sent because ctx was already
// done. Anything
// else (a connection lost after sending) may have committed. pgx's SafeToRetry
// alone is not enough: a reply lost after sending can surface as "conn closed".
func certainlyNotCommitted(ctx context.Context, err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// ERROR rolled the transaction back. FATAL ends the session: a COMMIT
		// terminated while it waited for a synchronous standby has already
		// committed locally.
		sev := pgErr.SeverityUnlocalized
		if sev == "" {
			sev = pgErr.Severity
		}
		return sev == "ERROR"
	}
	return pgconn.SafeToRetry(err) && ctx.Err() != nil && errors.Is(err, ctx.Err())
}

func isServerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// dbError wraps a database error, naming a missing schema as such.
func dbError(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703") {
		return fmt.Errorf("%w: run `inbox migrate up` (%s: %w)", schema.ErrNotMigrated, op, err)
	}
	return fmt.Errorf("pginbox: %s: %w", op, err)
}

package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
)

// pool is where the view's transactions run: the system pool for a view of
// every scope, the admin's pool otherwise.
func (v *AdminView) pool() *pgxpool.Pool {
	if v.all {
		return v.admin.sys
	}
	return v.admin.pool
}

// queries is what a call of one statement runs on: the view's scope applied
// in the same round trip, or the system pool once it proved to see every scope.
func (v *AdminView) queries(ctx context.Context) (*db.Queries, error) {
	if !v.all {
		drv, err := v.admin.drv.Get(ctx, v.admin.pool)
		if err != nil {
			return nil, dbError("reading the layout (Citus or one server)", err)
		}
		return db.New(drv.Scoped(v.admin.pool, v.scope)), nil
	}
	q := db.New(v.admin.sys)
	if err := v.checkUnrestricted(ctx, q); err != nil {
		return nil, err
	}
	return q, nil
}

// enter readies a transaction the view opened: it applies the view's scope,
// or checks that the role sees every scope.
func (v *AdminView) enter(ctx context.Context, tx pgx.Tx) error {
	if v.all {
		return v.checkUnrestricted(ctx, db.New(tx))
	}
	drv, err := v.admin.drv.Get(ctx, tx)
	if err != nil {
		return dbError("reading the layout (Citus or one server)", err)
	}
	return applyScope(ctx, drv, tx, v.scope)
}

// enterCaller readies a caller's transaction: it gets the view's scope unless
// it has one, and one of another scope is refused (*ScopeMismatchError).
func (v *AdminView) enterCaller(ctx context.Context, tx pgx.Tx) error {
	if v.all {
		return v.checkUnrestricted(ctx, db.New(tx))
	}
	drv, err := v.admin.drv.Get(ctx, tx)
	if err != nil {
		return dbError("reading the layout (Citus or one server)", err)
	}
	return ensureScope(ctx, drv, tx, v.scope)
}

// checkUnrestricted fails with ErrTenancyRestricted when row-level security
// would show the role one scope (or none), so a view of every scope would
// silently miss receipts.
func (v *AdminView) checkUnrestricted(ctx context.Context, q *db.Queries) error {
	restricted, err := q.ScopeRestricted(ctx)
	if err != nil {
		return dbError("checking row-level security", err)
	}
	if restricted {
		return fmt.Errorf("%w (view: %s)", ErrTenancyRestricted, v)
	}
	return nil
}

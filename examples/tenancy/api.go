package tenancy

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// Order is a row of tenancy_orders.
type Order struct {
	TenantID   string // the tenant the row belongs to (the policy's column)
	OrderID    string // unique within the tenant
	TotalCents int64  // the order's total, in cents
}

// Orders is the API's read of one tenant's orders, on the application role.
// The query has no tenant predicate on purpose: the policy supplies it, from
// the scope this transaction applied. tenant comes from authentication.
func Orders(ctx context.Context, app *pgxpool.Pool, tenant string) ([]Order, error) {
	var out []Order
	err := pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
		if err := inbox.ApplyScope(ctx, tx, inbox.Tenant(tenant)); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT tenant_id, order_id, total_cents FROM tenancy_orders ORDER BY tenant_id, order_id`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Order])
		return err
	})
	return out, err
}

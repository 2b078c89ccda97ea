package tenancy

import (
	"context"

	"github.com/pginbox/pginbox/handler"
)

// Consumer and event of the example.
const (
	Consumer  = "orders.projection.v1"
	EventType = "order.imported"
)

// OrderImported is an order a partner system sent for one of our tenants.
// TenantID comes from the partner: the handler trusts it, which is the bug
// the database catches when it names another tenant than the receipt's.
type OrderImported struct {
	TenantID   string `json:"tenantId"`   // as the partner says: may be wrong
	OrderID    string `json:"orderId"`    // the partner's order ID
	TotalCents int64  `json:"totalCents"` // the order's total, in cents
}

// Register adds the projection's handler to reg.
func Register(reg *handler.Registry) error {
	return reg.Register(handler.Key{Consumer: Consumer, EventType: EventType, SchemaVersion: 1},
		handler.Typed(handler.DecodeOptions{}, project))
}

// project writes the order in the receipt's transaction, which the worker
// opened with the receipt's tenant applied: the policy on tenancy_orders
// refuses a row of any other tenant, and the write commits with the
// completion or not at all.
func project(ctx context.Context, m *handler.Msg, p OrderImported) error {
	_, err := m.Tx.Exec(ctx,
		`INSERT INTO tenancy_orders (tenant_id, order_id, total_cents) VALUES ($1, $2, $3)
		 ON CONFLICT (tenant_id, order_id) DO NOTHING`,
		p.TenantID, p.OrderID, p.TotalCents)
	return err
}

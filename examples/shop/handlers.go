package shop

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/examples/shop/shopdb"
	"github.com/pginbox/pginbox/handler"
)

// The compiler holds each handler to every event its consumer declared.
var (
	_ OrdersProjectionV1Handler = Projection{}
	_ BillingV1Handler          = Billing{}
)

// Projection keeps shop_orders, the orders read model (consumer
// orders.projection.v1).
type Projection struct{}

// HandleOrderCreated projects a v1 order, which is in EUR.
func (Projection) HandleOrderCreated(ctx context.Context, m *handler.Msg, q *shopdb.Queries, p OrderCreated) error {
	return q.InsertOrder(ctx, shopdb.InsertOrderParams{
		TenantID:   m.Scope.ID,
		OrderID:    p.OrderID,
		CustomerID: p.CustomerID,
		TotalCents: p.TotalCents,
		Currency:   "EUR",
	})
}

// HandleOrderCreatedV2 projects an order in its own currency.
func (Projection) HandleOrderCreatedV2(ctx context.Context, m *handler.Msg, q *shopdb.Queries, p OrderCreatedV2) error {
	return q.InsertOrder(ctx, shopdb.InsertOrderParams{
		TenantID:   m.Scope.ID,
		OrderID:    p.OrderID,
		CustomerID: p.CustomerID,
		TotalCents: p.TotalCents,
		Currency:   p.Currency,
	})
}

// HandleOrderCancelled marks the projected order cancelled, and fails (to be
// retried) while the order is not projected yet.
func (Projection) HandleOrderCancelled(ctx context.Context, m *handler.Msg, q *shopdb.Queries, p OrderCancelled) error {
	n, err := q.CancelOrder(ctx, shopdb.CancelOrderParams{TenantID: m.Scope.ID, OrderID: p.OrderID})
	if err != nil {
		return err
	}
	if n == 0 {
		// Events are not ordered: the creation may still be on its way, so
		// retry rather than dead-letter.
		return fmt.Errorf("order %s not projected yet", p.OrderID)
	}
	return nil
}

// Billing invoices every order (consumer billing.v1).
type Billing struct{}

// HandleOrderCreated invoices a v1 order, in EUR.
func (Billing) HandleOrderCreated(ctx context.Context, m *handler.Msg, q *shopdb.Queries, p OrderCreated) error {
	return q.InsertInvoice(ctx, shopdb.InsertInvoiceParams{
		TenantID:    m.Scope.ID,
		OrderID:     p.OrderID,
		AmountCents: p.TotalCents,
		Currency:    "EUR",
	})
}

// HandleOrderCreatedV2 invoices an order in its own currency.
func (Billing) HandleOrderCreatedV2(ctx context.Context, m *handler.Msg, q *shopdb.Queries, p OrderCreatedV2) error {
	return q.InsertInvoice(ctx, shopdb.InsertInvoiceParams{
		TenantID:    m.Scope.ID,
		OrderID:     p.OrderID,
		AmountCents: p.TotalCents,
		Currency:    p.Currency,
	})
}

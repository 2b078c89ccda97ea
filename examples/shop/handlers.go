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

func (Projection) HandleOrderCreated(ctx context.Context, m *handler.Msg, q *shopdb.Queries, p OrderCreated) error {
	return q.InsertOrder(ctx, shopdb.InsertOrderParams{
		TenantID:   m.Scope.ID,
		OrderID:    p.OrderID,
		CustomerID: p.CustomerID,
		TotalCents: p.TotalCents,
		Currency:   "EUR",
	})
}

func (Projection) HandleOrderCreatedV2(ctx context.Context, m *handler.Msg, q *shopdb.Queries, p OrderCreatedV2) error {
	return q.InsertOrder(ctx, shopdb.InsertOrderParams{
		TenantID:   m.Scope.ID,
		OrderID:    p.OrderID,
		CustomerID: p.CustomerID,
		TotalCents: p.TotalCents,
		Currency:   p.Currency,
	})
}

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

func (Billing) HandleOrderCreated(ctx context.Context, m *handler.Msg, q *shopdb.Queries, p OrderCreated) error {
	return q.InsertInvoice(ctx, shopdb.InsertInvoiceParams{
		TenantID:    m.Scope.ID,
		OrderID:     p.OrderID,
		AmountCents: p.TotalCents,
		Currency:    "EUR",
	})
}

func (Billing) HandleOrderCreatedV2(ctx context.Context, m *handler.Msg, q *shopdb.Queries, p OrderCreatedV2) error {
	return q.InsertInvoice(ctx, shopdb.InsertInvoiceParams{
		TenantID:    m.Scope.ID,
		OrderID:     p.OrderID,
		AmountCents: p.TotalCents,
		Currency:    p.Currency,
	})
}

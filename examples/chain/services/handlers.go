package services

import (
	"context"

	"github.com/pginbox/pginbox/handler"
)

// The compiler holds each handler to every event its consumer declared.
var (
	_ OrdersV1Handler   = Orders{}
	_ BillingV1Handler  = Billing{}
	_ ShippingV1Handler = Shipping{}
)

// Orders stores created orders and confirms them to billing.
type Orders struct{}

// HandleOrderCreated stores the order and emits order.confirmed in the same
// transaction: the confirmation leaves only if the order is stored.
func (Orders) HandleOrderCreated(ctx context.Context, m *handler.Msg, p OrderCreated) error {
	if _, err := m.Tx.Exec(ctx, "INSERT INTO chain_orders (order_id, total_cents) VALUES ($1, $2)", p.OrderID, p.TotalCents); err != nil {
		return err
	}
	_, err := EmitOrderConfirmed(ctx, m.Tx, OrderConfirmed(p))
	return err
}

// Billing invoices confirmed orders and tells shipping.
type Billing struct{}

// HandleOrderConfirmed writes the invoice and emits invoice.issued with it.
func (Billing) HandleOrderConfirmed(ctx context.Context, m *handler.Msg, p OrderConfirmed) error {
	inv := InvoiceIssued{InvoiceID: "inv-" + p.OrderID, OrderID: p.OrderID, AmountCents: p.TotalCents}
	if _, err := m.Tx.Exec(ctx, "INSERT INTO chain_invoices (invoice_id, order_id, amount_cents) VALUES ($1, $2, $3)",
		inv.InvoiceID, inv.OrderID, inv.AmountCents); err != nil {
		return err
	}
	_, err := EmitInvoiceIssued(ctx, m.Tx, inv)
	return err
}

// Shipping ships invoiced orders; the chain ends here.
type Shipping struct{}

// HandleInvoiceIssued records the shipment of the invoiced order.
func (Shipping) HandleInvoiceIssued(ctx context.Context, m *handler.Msg, p InvoiceIssued) error {
	_, err := m.Tx.Exec(ctx, "INSERT INTO chain_shipments (order_id, invoice_id) VALUES ($1, $2)", p.OrderID, p.InvoiceID)
	return err
}

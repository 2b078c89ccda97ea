// Package services is the example chain's three services, each with its own
// database: orders handles created orders and emits order.confirmed, billing
// handles that and emits invoice.issued, shipping handles that and closes the
// chain. The events are declared below; `go generate` writes inbox_gen.go
// (typed accept, handler and emit functions) from them.
//
// Each service's handler writes its business row and emits the next event
// through m.Tx, so the row, the outgoing event and the inbox completion
// commit together; each service's relay publishes its outbox into the next
// service's inbox (outbox.InboxPublisher), which deduplicates by event ID.
package services

import (
	"errors"
	"fmt"
)

//go:generate go run github.com/pginbox/pginbox/cmd/inboxgen

// OrderCreated enters the chain: the storefront sends it to orders.
//
//inbox:event type=order.created version=1 consumers=orders.v1
type OrderCreated struct {
	OrderID    string `json:"orderId"`    // the storefront's order ID
	TotalCents int64  `json:"totalCents"` // the order's total, in cents
}

// Validate rejects an order without an ID or with a negative total at accept.
func (e OrderCreated) Validate() error {
	if e.OrderID == "" {
		return errors.New("orderId is required")
	}
	if e.TotalCents < 0 {
		return fmt.Errorf("totalCents %d is negative", e.TotalCents)
	}
	return nil
}

// OrderConfirmed is what orders tells billing about an order it stored.
//
//inbox:event type=order.confirmed version=1 consumers=billing.v1
//outbox:event type=order.confirmed version=1 source=orders destination=billing.v1
type OrderConfirmed struct {
	OrderID    string `json:"orderId"`    // the order stored, and its ordering key
	TotalCents int64  `json:"totalCents"` // what billing invoices, in cents
}

// OrderingKey publishes one order's events in order.
func (e OrderConfirmed) OrderingKey() string { return e.OrderID }

// InvoiceIssued is what billing tells shipping about an invoice it wrote.
//
//inbox:event type=invoice.issued version=1 consumers=shipping.v1
//outbox:event type=invoice.issued version=1 source=billing destination=shipping.v1
type InvoiceIssued struct {
	InvoiceID   string `json:"invoiceId"`   // billing's invoice ID
	OrderID     string `json:"orderId"`     // the order invoiced, and the ordering key
	AmountCents int64  `json:"amountCents"` // the amount invoiced, in cents
}

// OrderingKey publishes one order's events in order.
func (e InvoiceIssued) OrderingKey() string { return e.OrderID }

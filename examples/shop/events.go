// Package shop is an example application of pginbox's typed events: it
// declares its events below, `go generate` writes inbox_gen.go from them, and
// handlers.go implements the generated per-consumer interfaces with the shop's
// own sqlc queries (package shopdb).
package shop

import (
	"errors"
	"fmt"
)

// sqlc first: inboxgen checks the shopdb package it points at.
//go:generate go tool -modfile=../../tools.mod sqlc generate -f sqlc.yaml
//go:generate go run github.com/pginbox/pginbox/cmd/inboxgen -queries github.com/pginbox/pginbox/examples/shop/shopdb

// OrderCreated is the first version of order.created. The order projection
// and billing both consume it.
//
//inbox:event type=order.created version=1 consumers=orders.projection.v1,billing.v1
type OrderCreated struct {
	OrderID    string `json:"orderId"`    // required
	CustomerID string `json:"customerId"` // who ordered
	TotalCents int64  `json:"totalCents"` // in EUR cents; not negative
}

// Validate runs at accept (rejecting the event) and again before handling.
func (e OrderCreated) Validate() error {
	if e.OrderID == "" {
		return errors.New("orderId is required")
	}
	if e.TotalCents < 0 {
		return fmt.Errorf("totalCents %d is negative", e.TotalCents)
	}
	return nil
}

// OrderCreatedV2 adds the currency; v1 orders are in EUR.
//
//inbox:event type=order.created version=2 consumers=orders.projection.v1,billing.v1
type OrderCreatedV2 struct {
	OrderID    string `json:"orderId"`    // required
	CustomerID string `json:"customerId"` // who ordered
	TotalCents int64  `json:"totalCents"` // in cents of Currency; not negative
	Currency   string `json:"currency"`   // an ISO 4217 code, e.g. "EUR"
}

// Validate has a pointer receiver; the generated code finds it either way.
func (e *OrderCreatedV2) Validate() error {
	if err := (OrderCreated{OrderID: e.OrderID, TotalCents: e.TotalCents}).Validate(); err != nil {
		return err
	}
	if len(e.Currency) != 3 {
		return fmt.Errorf("currency %q is not an ISO 4217 code", e.Currency)
	}
	return nil
}

// OrderCancelled tolerates fields it does not know (unknown=allow): the
// checkout service adds audit fields to it without coordinating.
//
//inbox:event type=order.cancelled version=1 consumers=orders.projection.v1 unknown=allow
type OrderCancelled struct {
	OrderID string `json:"orderId"` // the order cancelled
	Reason  string `json:"reason"`  // why, in the customer's words
}

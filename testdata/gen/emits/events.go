// Package emits covers a package that handles some events and emits others,
// one of them on both sides (a modular monolith).
package emits

import "errors"

//inbox:event type=order.placed version=1 consumers=orders.v1
type OrderPlaced struct {
	OrderID string `json:"orderId"`
}

// OrderConfirmed is emitted by the orders handler and consumed by billing.
//
//inbox:event type=order.confirmed version=1 consumers=billing.v1
//outbox:event type=order.confirmed version=1 source=orders destination=billing.v1
type OrderConfirmed struct {
	OrderID string `json:"orderId"`
}

// OrderingKey keeps each order's events in order.
func (e OrderConfirmed) OrderingKey() string { return e.OrderID }

// orderShipped goes to a broker topic; values with spaces are quoted.
//
//outbox:event type="order shipped" version=2 source=orders destination="shipping events"
type orderShipped struct {
	OrderID string `json:"orderId"`
	Carrier string `json:"carrier"`
}

func (e *orderShipped) Validate() error {
	if e.Carrier == "" {
		return errors.New("carrier is required")
	}
	return nil
}

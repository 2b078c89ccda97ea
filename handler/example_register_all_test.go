package handler_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pginbox/pginbox/handler"
)

type OrderCreated struct {
	OrderID string `json:"orderId"`
}

type OrderCancelled struct {
	OrderID string `json:"orderId"`
}

// A consumer's handlers are registered together: if one of them cannot be, none
// is, so a worker never starts with half a consumer.
func ExampleRegistry_RegisterAll() {
	onCreated := handler.Typed(handler.DecodeOptions{}, func(ctx context.Context, m *handler.Msg, e OrderCreated) error {
		return nil // write through m.Tx
	})
	onCancelled := handler.Typed(handler.DecodeOptions{}, func(ctx context.Context, m *handler.Msg, e OrderCancelled) error {
		return nil
	})

	reg := handler.NewRegistry()
	err := reg.RegisterAll(
		handler.Entry{Key: handler.Key{Consumer: "billing.v1", EventType: "order.created", SchemaVersion: 1}, Func: onCreated},
		handler.Entry{Key: handler.Key{Consumer: "billing.v1", EventType: "order.cancelled", SchemaVersion: 1}, Func: onCancelled},
	)
	fmt.Println("billing:", err)

	// The second entry is taken already, so the first is not registered either.
	err = reg.RegisterAll(
		handler.Entry{Key: handler.Key{Consumer: "refunds.v1", EventType: "order.cancelled", SchemaVersion: 1}, Func: onCancelled},
		handler.Entry{Key: handler.Key{Consumer: "billing.v1", EventType: "order.created", SchemaVersion: 1}, Func: onCreated},
	)
	fmt.Println("duplicate:", errors.Is(err, handler.ErrDuplicateHandler))
	fmt.Println("consumers:", reg.Consumers())

	// Output:
	// billing: <nil>
	// duplicate: true
	// consumers: [billing.v1]
}

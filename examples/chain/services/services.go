package services

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
)

// The services, in chain order.
const (
	OrdersService   = "orders"
	BillingService  = "billing"
	ShippingService = "shipping"
)

// Names lists the services in chain order.
var Names = []string{OrdersService, BillingService, ShippingService}

// Schema is every service's business tables. Each service uses its own
// (orders: chain_orders, billing: chain_invoices, shipping: chain_shipments);
// creating all of them everywhere keeps one migration. No business key is
// unique, on purpose: an event applied twice shows up as two rows instead of
// hiding behind a constraint error.
const Schema = `
CREATE TABLE IF NOT EXISTS chain_orders (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id    text   NOT NULL,
    total_cents bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS chain_invoices (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    invoice_id   text   NOT NULL,
    order_id     text   NOT NULL,
    amount_cents bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS chain_shipments (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id   text   NOT NULL,
    invoice_id text   NOT NULL
);`

// Migrate creates the business tables at dsn (after pginbox's schema).
func Migrate(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, Schema)
	return err
}

// Table is the business table a service writes, one row per order.
func Table(service string) string {
	return map[string]string{OrdersService: "chain_orders", BillingService: "chain_invoices", ShippingService: "chain_shipments"}[service]
}

// Next is the service a service's relay publishes to; "" for shipping.
func Next(service string) string {
	return map[string]string{OrdersService: BillingService, BillingService: ShippingService}[service]
}

// Registry returns a registry with service's handlers.
func Registry(service string) (*handler.Registry, error) {
	reg := handler.NewRegistry()
	var err error
	switch service {
	case OrdersService:
		err = RegisterOrdersV1(reg, Orders{})
	case BillingService:
		err = RegisterBillingV1(reg, Billing{})
	case ShippingService:
		err = RegisterShippingV1(reg, Shipping{})
	default:
		err = fmt.Errorf("services: unknown service %q (want orders, billing or shipping)", service)
	}
	return reg, err
}

// NewWorker returns service's worker on its database.
func NewWorker(pool *pgxpool.Pool, service string, cfg inbox.WorkerConfig) (*inbox.Worker, error) {
	reg, err := Registry(service)
	if err != nil {
		return nil, err
	}
	return inbox.NewWorker(pool, reg, cfg)
}

// NewRelay returns the relay publishing service's outbox (on pool) into the
// inbox of the next service (next, a client on that service's database).
func NewRelay(pool *pgxpool.Pool, next *inbox.Client, cfg outbox.RelayConfig) (*outbox.Relay, error) {
	return outbox.NewRelay(pool, outbox.InboxPublisher{Client: next}, cfg)
}

// Consumer is the consumer a service's inbox accepts for.
func Consumer(service string) string {
	return map[string]string{OrdersService: OrdersV1.Name(), BillingService: BillingV1.Name(), ShippingService: ShippingV1.Name()}[service]
}

// NewInbox returns a client accepting into service's inbox (on pool) for its
// consumer only, so a misrouted event is rejected instead of orphaned.
func NewInbox(pool *pgxpool.Pool, service string, cfg inbox.Config) (*inbox.Client, error) {
	cfg.Consumers = []string{Consumer(service)}
	return inbox.NewClient(pool, cfg)
}

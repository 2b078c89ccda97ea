// Command shopd runs the example shop: an HTTP webhook that accepts checkout
// events through the generated typed accept functions, and a worker that
// applies them with the shop's handlers.
//
//	DATABASE_URL=postgres://... go run ./examples/shop/cmd/shopd
//	curl -X POST localhost:8080/orders/created \
//	     -H 'X-Tenant-ID: acme' -H 'X-Event-ID: evt-1' \
//	     -d '{"orderId":"o-1","customerId":"c-1","totalCents":1250}'
//
// The database needs pginbox's schema (`inbox migrate up`) and
// examples/shop/schema.sql.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/examples/shop"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()

	client, err := inbox.NewClient(pool, inbox.Config{Consumers: shop.ConsumerNames()})
	if err != nil {
		return err
	}
	reg := handler.NewRegistry()
	// A handler missing a method for an event its consumer declared does not
	// compile here.
	if err := shop.RegisterOrdersProjectionV1(reg, shop.Projection{}); err != nil {
		return err
	}
	if err := shop.RegisterBillingV1(reg, shop.Billing{}); err != nil {
		return err
	}
	worker, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{})
	if err != nil {
		return err
	}
	if err := worker.Start(ctx); err != nil {
		return err
	}
	defer worker.Stop(context.Background())

	http.Handle("POST /orders/created", webhook(func(ctx context.Context, d shop.Delivery, p shop.OrderCreated) error {
		// The order projection and billing each get their own receipt.
		if _, err := shop.AcceptOrderCreated(ctx, client, shop.OrdersProjectionV1, d, p); err != nil {
			return err
		}
		_, err := shop.AcceptOrderCreated(ctx, client, shop.BillingV1, d, p)
		return err
	}))
	http.Handle("POST /orders/cancelled", webhook(func(ctx context.Context, d shop.Delivery, p shop.OrderCancelled) error {
		_, err := shop.AcceptOrderCancelled(ctx, client, shop.OrdersProjectionV1, d, p)
		return err
	}))
	srv := &http.Server{Addr: ":8080"}
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// webhook decodes the body into T and answers with what inbox.ActionFor says:
// 200 once the event is durable, 4xx when a redelivery cannot succeed, 503 so
// the sender retries.
func webhook[T any](accept func(context.Context, shop.Delivery, T) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p T
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d := shop.Delivery{
			// Take the tenant from authentication in a real service.
			Scope:     inbox.Tenant(r.Header.Get("X-Tenant-ID")),
			Source:    "checkout",
			MessageID: r.Header.Get("X-Event-ID"),
		}
		err := accept(r.Context(), d, p)
		switch inbox.ActionFor(err) {
		case inbox.ActionAck:
			w.WriteHeader(http.StatusOK)
		case inbox.ActionReject:
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		default:
			log.Printf("accept: %v", err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
		}
	})
}

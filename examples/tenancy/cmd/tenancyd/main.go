// Command tenancyd runs the tenancy example: an HTTP endpoint that accepts
// partner orders for the tenant of the request, a worker that projects them
// into tenancy_orders, and a read of one tenant's orders. The application
// connects as a restricted role; only the worker's claims use the system role.
//
// Set up once, as the owner of the database (see docs/TENANCY.md):
//
//	inbox migrate up
//	psql -f examples/tenancy/schema.sql
//	psql -c "CREATE ROLE tenancy_app LOGIN" -c "CREATE ROLE tenancy_system LOGIN BYPASSRLS"  # a superuser
//	psql -c "GRANT SELECT, INSERT, UPDATE, DELETE ON tenancy_orders TO tenancy_app"
//	inbox tenancy grant tenancy_app && inbox tenancy grant tenancy_system --system
//	inbox tenancy enable
//
// Then:
//
//	DATABASE_URL=postgres://tenancy_app@localhost/app \
//	SYSTEM_DATABASE_URL=postgres://tenancy_system@localhost/app go run ./examples/tenancy/cmd/tenancyd
//	# ADDR=127.0.0.1:9090 to listen elsewhere than :8080
//	curl -X POST localhost:8080/orders -H 'X-Tenant-ID: acme' -H 'X-Event-ID: evt-1' \
//	     -d '{"tenantId":"acme","orderId":"o-1","totalCents":1250}'
//	curl localhost:8080/orders -H 'X-Tenant-ID: acme'
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

	"github.com/pginbox/pginbox/examples/tenancy"
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

	app, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer app.Close()
	system, err := pgxpool.New(ctx, os.Getenv("SYSTEM_DATABASE_URL"))
	if err != nil {
		return err
	}
	defer system.Close()

	client, err := inbox.NewClient(app, inbox.Config{Consumers: []string{tenancy.Consumer}})
	if err != nil {
		return err
	}
	reg := handler.NewRegistry()
	if err := tenancy.Register(reg); err != nil {
		return err
	}
	worker, err := inbox.NewWorker(app, reg, inbox.WorkerConfig{SystemPool: system})
	if err != nil {
		return err
	}
	if err := worker.Start(ctx); err != nil {
		return err
	}
	defer worker.Stop(context.Background())

	// Take the tenant from authentication in a real service.
	http.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		var p tenancy.OrderImported
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, err := client.Accept(r.Context(), inbox.Message{
			Identity: inbox.Identity{
				Scope: inbox.Tenant(r.Header.Get("X-Tenant-ID")), Source: "partner",
				Consumer: tenancy.Consumer, MessageID: r.Header.Get("X-Event-ID"),
			},
			EventType: tenancy.EventType, SchemaVersion: 1, Payload: p,
		})
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
	http.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		orders, err := tenancy.Orders(r.Context(), app, r.Header.Get("X-Tenant-ID"))
		if errors.Is(err, inbox.ErrInvalid) { // no tenant
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err != nil {
			log.Printf("orders: %v", err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(orders)
	})
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":8080"
	}
	srv := &http.Server{Addr: addr}
	log.Printf("tenancyd: listening on %s", addr)
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

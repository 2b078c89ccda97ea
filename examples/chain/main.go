// Command chain runs three services in a chain, each with its own database:
// the storefront places orders with orders; orders stores each and emits
// order.confirmed; its relay publishes that into billing's inbox; billing
// writes an invoice and emits invoice.issued; its relay publishes that into
// shipping's inbox; shipping writes a shipment. It prints what each service
// did and how one order's messages are linked (message, causation and
// correlation IDs).
//
//	go run ./examples/chain                       # a throwaway PostgreSQL, one database per service
//	DATABASE_URL=postgres://... go run ./examples/chain  # one schema per service there (chain_orders, ...)
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pginbox/pginbox/examples/chain/services"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/schema"
)

func main() {
	orders := flag.Int("orders", 5, "orders the storefront places")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout, options{databaseURL: os.Getenv("DATABASE_URL"), orders: *orders})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chain:", err)
		os.Exit(1)
	}
}

type options struct {
	databaseURL string // empty: a throwaway cluster
	orders      int
}

// service is one running service: its database, inbox, worker and relay.
type service struct {
	name   string
	pool   *pgxpool.Pool
	inbox  *inbox.Client
	worker *inbox.Worker
	relay  *outbox.Relay // nil for the end of the chain
}

func run(ctx context.Context, out io.Writer, o options) error {
	if o.orders < 1 || o.orders > 10_000 {
		return fmt.Errorf("-orders %d: want 1 to 10000", o.orders)
	}
	targets, closeTargets, err := databases(ctx, out, o.databaseURL)
	if err != nil {
		return err
	}
	defer closeTargets()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	svcs := map[string]*service{}
	for _, name := range services.Names {
		s, err := open(ctx, name, targets[name], log)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer s.pool.Close()
		defer s.inbox.Close()
		svcs[name] = s
	}
	// Each relay publishes into the next service's inbox; start from the end.
	for _, name := range services.Names {
		s := svcs[name]
		if next := services.Next(name); next != "" {
			if s.relay, err = services.NewRelay(s.pool, svcs[next].inbox, outbox.RelayConfig{Logger: log}); err != nil {
				return err
			}
		}
		if s.worker, err = services.NewWorker(s.pool, name, inbox.WorkerConfig{Logger: log}); err != nil {
			return err
		}
	}
	for _, name := range services.Names {
		s := svcs[name]
		if err := s.worker.Start(ctx); err != nil {
			return err
		}
		defer s.worker.Stop(context.WithoutCancel(ctx))
		if s.relay != nil {
			if err := s.relay.Start(ctx); err != nil {
				return err
			}
			defer s.relay.Stop(context.WithoutCancel(ctx))
		}
	}

	tag := runTag()
	start := time.Now()
	if err := placeOrders(ctx, out, svcs[services.OrdersService].inbox, tag, o.orders); err != nil {
		return err
	}
	shipping := svcs[services.ShippingService]
	for {
		n, err := countRows(ctx, shipping.pool, "chain_shipments", tag)
		if err != nil {
			return err
		}
		// Through means shipped and every event marked published: a relay
		// marks an event after the next inbox accepted it, so a shipment
		// can commit before billing's relay marks the event behind it.
		marked, err := allPublished(ctx, svcs, tag, o.orders)
		if err != nil {
			return err
		}
		if n >= o.orders && marked {
			break
		}
		if time.Since(start) > time.Minute {
			return fmt.Errorf("after a minute shipping has %d of %d orders (every event published: %t): see the logs above, and `inbox stats` / `inbox outbox stats` on each service's database", n, o.orders, marked)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "all %d orders went through orders, billing and shipping in %s\n\n", o.orders, time.Since(start).Round(time.Millisecond))
	if err := report(ctx, out, svcs, tag); err != nil {
		return err
	}
	return trace(ctx, out, svcs, tag)
}

// open connects to a service's database and migrates it: pginbox's schema,
// then the business tables.
func open(ctx context.Context, name string, cfg *pgxpool.Config, log *slog.Logger) (*service, error) {
	db := stdlib.OpenDB(*cfg.ConnConfig)
	m, err := schema.NewMigrator(db)
	if err == nil {
		_, err = m.Up(ctx)
	}
	db.Close()
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 16 // the worker's handlers, listener and claims, the relay, accepts
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, services.Schema); err != nil {
		pool.Close()
		return nil, err
	}
	client, err := services.NewInbox(pool, name, inbox.Config{Logger: log})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &service{name: name, pool: pool, inbox: client}, nil
}

// databases returns a connection config per service: a database of its own
// on a throwaway cluster, or a schema of its own on databaseURL.
func databases(ctx context.Context, out io.Writer, databaseURL string) (map[string]*pgxpool.Config, func(), error) {
	targets := map[string]*pgxpool.Config{}
	if databaseURL != "" {
		base, err := pgxpool.ParseConfig(databaseURL)
		if err != nil {
			return nil, nil, errors.New("DATABASE_URL is not a valid PostgreSQL connection string")
		}
		conn, err := pgx.ConnectConfig(ctx, base.ConnConfig)
		if err != nil {
			return nil, nil, err
		}
		defer conn.Close(ctx)
		for _, name := range services.Names {
			schemaName := "chain_" + name
			if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schemaName); err != nil {
				return nil, nil, err
			}
			cfg := base.Copy()
			cfg.ConnConfig.RuntimeParams["search_path"] = schemaName
			targets[name] = cfg
		}
		fmt.Fprintln(out, "DATABASE_URL: each service gets its own schema there (chain_orders, chain_billing, chain_shipping)")
		return targets, func() {}, nil
	}
	fmt.Fprintln(out, "No DATABASE_URL: starting a throwaway PostgreSQL...")
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("starting a throwaway PostgreSQL (needs the server binaries: initdb, postgres): %w; or set DATABASE_URL", err)
	}
	conn, err := pgx.Connect(ctx, cluster.ConnString("postgres"))
	if err != nil {
		cluster.Stop()
		return nil, nil, err
	}
	defer conn.Close(ctx)
	for _, name := range services.Names {
		if _, err := conn.Exec(ctx, "CREATE DATABASE chain_"+name); err != nil {
			cluster.Stop()
			return nil, nil, err
		}
		cfg, err := pgxpool.ParseConfig(cluster.ConnString("chain_" + name))
		if err != nil {
			cluster.Stop()
			return nil, nil, err
		}
		targets[name] = cfg
	}
	fmt.Fprintln(out, "each service gets its own database: chain_orders, chain_billing, chain_shipping")
	return targets, func() { cluster.Stop() }, nil
}

// runTag keeps a run's order IDs apart from earlier runs' on a kept database.
func runTag() string {
	b := make([]byte, 2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func orderID(tag string, i int) string { return fmt.Sprintf("o-%s-%d", tag, i) }

// placeOrders is the storefront: it accepts orders into the orders service's
// inbox, and delivers the first one twice, as a broker may.
func placeOrders(ctx context.Context, out io.Writer, client *inbox.Client, tag string, n int) error {
	dups := 0
	for i := 1; i <= n; i++ {
		id := orderID(tag, i)
		d := services.Delivery{
			Scope: inbox.Global(), Source: "storefront", MessageID: "evt-" + id,
			Metadata: map[string]string{outbox.MetadataCorrelationID: fmt.Sprintf("checkout-%s-%d", tag, i)},
		}
		times := 1
		if i == 1 {
			times = 2
		}
		for range times {
			res, err := services.AcceptOrderCreated(ctx, client, services.OrdersV1, d, services.OrderCreated{OrderID: id, TotalCents: int64(1000 + i)})
			if err != nil {
				return err
			}
			if res.Outcome == inbox.Duplicate {
				dups++
			}
		}
	}
	fmt.Fprintf(out, "storefront -> orders: %d orders accepted, %d redelivery deduplicated\n", n, dups)
	return nil
}

func countRows(ctx context.Context, pool *pgxpool.Pool, table, tag string) (int, error) {
	var n int
	err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE order_id LIKE $1", "o-"+tag+"-%").Scan(&n)
	return n, err
}

// allPublished reports whether each service with a relay has n of this
// run's events marked published.
func allPublished(ctx context.Context, svcs map[string]*service, tag string, n int) (bool, error) {
	for _, name := range services.Names {
		s := svcs[name]
		if s.relay == nil {
			continue
		}
		published, err := countPublished(ctx, s.pool, tag)
		if err != nil {
			return false, err
		}
		if published < n {
			return false, nil
		}
	}
	return true, nil
}

// countPublished counts this run's events a service's relay marked published.
func countPublished(ctx context.Context, pool *pgxpool.Pool, tag string) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM pginbox_outbox WHERE status = 'PUBLISHED' AND payload->>'orderId' LIKE $1`,
		"o-"+tag+"-%").Scan(&n)
	return n, err
}

// report prints what each service holds for this run.
func report(ctx context.Context, out io.Writer, svcs map[string]*service, tag string) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tBUSINESS ROWS\tRECEIPTS COMPLETED\tEVENTS PUBLISHED")
	like := "o-" + tag + "-%"
	for _, name := range services.Names {
		s := svcs[name]
		rows, err := countRows(ctx, s.pool, services.Table(name), tag)
		if err != nil {
			return err
		}
		var done int
		err = s.pool.QueryRow(ctx, `SELECT count(*) FROM pginbox_receipts WHERE status = 'COMPLETED' AND payload->>'orderId' LIKE $1`,
			like).Scan(&done)
		if err != nil {
			return err
		}
		published, err := countPublished(ctx, s.pool, tag)
		if err != nil {
			return err
		}
		pub := fmt.Sprint(published)
		if s.relay == nil {
			pub = "- (end of the chain)"
		}
		fmt.Fprintf(tw, "%s\t%d %s\t%d\t%s\n", name, rows, services.Table(name), done, pub)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	return nil
}

// trace follows the first order through the chain by its receipts: each
// hop's message ID is the event ID the previous service emitted, and its
// causation ID the message that service handled.
func trace(ctx context.Context, out io.Writer, svcs map[string]*service, tag string) error {
	id := orderID(tag, 1)
	fmt.Fprintf(out, "order %s through the chain:\n", id)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SERVICE\tEVENT\tSOURCE\tMESSAGE ID\tCAUSED BY\tCORRELATION")
	for _, name := range services.Names {
		var eventType, source, messageID string
		var md map[string]string
		err := svcs[name].pool.QueryRow(ctx, `SELECT event_type, source, message_id, metadata
			FROM pginbox_receipts WHERE payload->>'orderId' = $1`, id).Scan(&eventType, &source, &messageID, &md)
		if err != nil {
			return fmt.Errorf("%s: reading the receipt of %s: %w", name, id, err)
		}
		cause := md[outbox.MetadataCausationID]
		if cause == "" {
			cause = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", name, eventType, source, messageID, cause, md[outbox.MetadataCorrelationID])
	}
	return tw.Flush()
}

// Command shopmetrics runs the example shop (examples/shop) observed with
// OpenTelemetry through otelinbox: a signed webhook endpoint
// (transport/webhook) accepts orders for orders.projection.v1 and stores the
// sender's traceparent, the shop's worker projects them, every accept and
// handler call is a span in the sender's trace, and the metrics (accept
// outcomes, handler durations, worker events, backlog gauges) are served for
// Prometheus by the OpenTelemetry Prometheus exporter.
//
//	DATABASE_URL=postgres://... WEBHOOK_SECRET=$(openssl rand -hex 32) \
//	  go run . -addr 127.0.0.1:8080 -metrics-addr 127.0.0.1:9464 -key-id shop-1 -tenant acme
//	curl -s 127.0.0.1:9464/metrics | grep pginbox
//
// The database needs pginbox's schema (`inbox migrate up`) and
// examples/shop/schema.sql. -trace-stdout prints finished spans as JSON.
//
// It is a module of its own so that examples/shop stays in pginbox's module
// without the OpenTelemetry SDK and the Prometheus client.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pginbox/pginbox/examples/shop"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/otelinbox"
	"github.com/pginbox/pginbox/transport/webhook"
)

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "shopmetrics:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet("shopmetrics", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "webhook listen address (POST /orders)")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:9464", "Prometheus listen address (GET /metrics)")
	keyID := fs.String("key-id", "", "the sender's key ID (Webhook-Key-Id header); its secret is $WEBHOOK_SECRET")
	tenant := fs.String("tenant", "", "tenant of every order signed with the key")
	traceStdout := fs.Bool("trace-stdout", false, "print finished spans as JSON on stdout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := getenv("WEBHOOK_SECRET")
	switch {
	case getenv("DATABASE_URL") == "":
		return errors.New("DATABASE_URL is not set: point it at a database with pginbox's schema and examples/shop/schema.sql")
	case secret == "":
		return errors.New("WEBHOOK_SECRET is not set: the shared secret of -key-id")
	case *keyID == "" || *tenant == "":
		return errors.New("-key-id and -tenant are required (see -h)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, getenv("DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	defer pool.Close()

	var tpOpts []sdktrace.TracerProviderOption
	if *traceStdout {
		exp, err := stdouttrace.New()
		if err != nil {
			return err
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	defer tp.Shutdown(context.Background())

	hooks, err := listen(*addr, *metricsAddr)
	if err != nil {
		return err
	}
	return serve(ctx, app{
		pool: pool, tp: tp, hooks: hooks, log: slog.Default(),
		key: webhook.Key{ID: *keyID, Secret: []byte(secret), Scope: inbox.Tenant(*tenant)},
	})
}

// app is what serve needs; tests build one on an ephemeral database with
// in-memory exporters.
type app struct {
	pool  *pgxpool.Pool
	tp    *sdktrace.TracerProvider
	hooks listeners
	key   webhook.Key
	log   *slog.Logger
}

type listeners struct{ webhook, metrics net.Listener }

func listen(addr, metricsAddr string) (listeners, error) {
	w, err := net.Listen("tcp", addr)
	if err != nil {
		return listeners{}, err
	}
	m, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		w.Close()
		return listeners{}, err
	}
	return listeners{webhook: w, metrics: m}, nil
}

// serve runs the webhook, the worker and the metrics endpoint until ctx
// ends.
func serve(ctx context.Context, a app) error {
	// Metrics: the Prometheus exporter is a reader of the meter provider.
	registry := promclient.NewRegistry()
	exporter, err := prometheus.New(prometheus.WithRegisterer(registry))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())

	tel, err := otelinbox.New(otelinbox.Config{TracerProvider: a.tp, MeterProvider: mp, Logger: a.log})
	if err != nil {
		return err
	}
	client, err := inbox.NewClient(a.pool, inbox.Config{
		Consumers:             shop.ConsumerNames(),
		AcceptMiddleware:      []inbox.AcceptMiddleware{tel.AcceptMiddleware()},
		AcceptBatchMiddleware: []inbox.AcceptBatchMiddleware{tel.AcceptBatchMiddleware()},
		Logger:                a.log,
	})
	if err != nil {
		return err
	}
	defer client.Close()
	reg := handler.NewRegistry()
	if err := shop.RegisterOrdersProjectionV1(reg, shop.Projection{}); err != nil {
		return err
	}
	worker, err := inbox.NewWorker(a.pool, reg, inbox.WorkerConfig{
		HandlerMiddleware: []handler.Middleware{tel.HandlerMiddleware()},
		Logger:            a.log,
	})
	if err != nil {
		return err
	}
	events, err := tel.ObserveWorker(worker)
	if err != nil {
		return err
	}
	defer events.Close()
	backlog, err := tel.ObserveBacklog(a.pool, shop.OrdersProjectionV1.Name())
	if err != nil {
		return err
	}
	defer backlog.Close()

	hook, err := webhook.NewHandler(client, webhook.Config{
		Keys:            []webhook.Key{a.key},
		Decode:          webhook.Envelope("checkout", shop.OrdersProjectionV1.Name()),
		MetadataHeaders: webhook.TraceHeaders, // the sender's trace continues here
		Logger:          a.log,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", hook)
	metrics := http.NewServeMux()
	metrics.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	servers := []*http.Server{
		{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		{Handler: metrics, ReadHeaderTimeout: 10 * time.Second},
	}

	if err := worker.Start(ctx); err != nil {
		return err
	}
	errc := make(chan error, 2)
	for i, l := range []net.Listener{a.hooks.webhook, a.hooks.metrics} {
		go func() { errc <- servers[i].Serve(l) }()
	}
	a.log.Info("shopmetrics: serving", "webhook", "http://"+a.hooks.webhook.Addr().String()+"/orders",
		"metrics", "http://"+a.hooks.metrics.Addr().String()+"/metrics")
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown) // in-flight accepts answer first
	}
	if serr := worker.Stop(shutdown); err == nil {
		err = serr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

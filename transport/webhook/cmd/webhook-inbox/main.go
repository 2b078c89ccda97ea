// Command webhook-inbox serves one signed-webhook endpoint that accepts events
// into a pginbox inbox.
//
//	DATABASE_URL=postgres://... WEBHOOK_SECRET=$(openssl rand -hex 32) \
//	  webhook-inbox -addr 127.0.0.1:8080 -key-id acme-2026 -tenant acme \
//	  -source acme-shop -consumer orders.projection.v1
//
// Bodies are envelopes: {"id", "type", "version", "data"}. With -idempotency
// the Idempotency-Key header is the message ID instead of "id". With
// -trace-headers the sender's W3C traceparent and tracestate headers are
// stored in the message's metadata, so a worker traced with otelinbox
// continues the sender's trace.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/pginbox/pginbox/transport/internal/program"
	"github.com/pginbox/pginbox/transport/webhook"
)

func main() { program.Main("webhook-inbox", run) }

func run() error {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	path := flag.String("path", "/webhook", "URL path of the endpoint")
	keyID := flag.String("key-id", "", "the sender's key ID (Webhook-Key-Id header); its secret is $WEBHOOK_SECRET")
	tenant := flag.String("tenant", "", "tenant of every event signed with the key (empty: global scope)")
	source := flag.String("source", "", "inbox source of the events (the sending system)")
	consumer := flag.String("consumer", "", "inbox consumer the events are for")
	idem := flag.Bool("idempotency", false, "require an Idempotency-Key header and use it as the message ID")
	traceHeaders := flag.Bool("trace-headers", false, "store the traceparent and tracestate headers in the message's metadata")
	flag.Parse()

	secret := os.Getenv("WEBHOOK_SECRET")
	switch {
	case secret == "":
		return errors.New("WEBHOOK_SECRET is not set: the shared secret of -key-id")
	case *keyID == "" || *source == "" || *consumer == "":
		return errors.New("-key-id, -source and -consumer are required (see -h)")
	}
	scope := program.Scope(*tenant)
	ctx, client, done, err := program.Open(*consumer)
	if err != nil {
		return err
	}
	defer done()
	cfg := webhook.Config{
		Keys:           []webhook.Key{{ID: *keyID, Secret: []byte(secret), Scope: scope}},
		Decode:         webhook.Envelope(*source, *consumer),
		IdempotencyKey: *idem,
	}
	if *traceHeaders {
		cfg.MetadataHeaders = webhook.TraceHeaders
	}
	h, err := webhook.NewHandler(client, cfg)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+*path, h)
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown) // lets in-flight accepts answer
	}()
	slog.Info("webhook-inbox: listening", "addr", *addr, "path", *path, "key", *keyID, "scope", scope)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

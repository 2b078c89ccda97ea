// Command webhook-inbox serves one signed-webhook endpoint that accepts events
// into a pginbox inbox.
//
//	WEBHOOK_SECRET=$(openssl rand -hex 32) webhook-inbox -database-url postgres://app@localhost/app \
//	  -addr 127.0.0.1:8080 -key-id acme-2026 -tenant acme -source acme-shop -consumer orders.projection.v1
//
// Bodies are envelopes: {"id", "type", "version", "data"}. With -idempotency
// the Idempotency-Key header is the message ID instead of "id". With
// -trace-headers the sender's W3C traceparent and tracestate headers are
// stored in the message's metadata, so a worker traced with otelinbox
// continues the sender's trace. The scope of the key comes from the flags
// (one tenant, or -global), never from the body. It runs until SIGINT or
// SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/webhook"
)

func main() { brokercmd.Main(run) }

type options struct {
	inbox                    brokercmd.Inbox
	addr, path, keyID        string
	secret                   string
	idempotency, traceHeader bool
}

func (o *options) parse(args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhook-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&o.path, "path", "/webhook", "URL path of the endpoint")
	fs.StringVar(&o.keyID, "key-id", "", "the sender's key ID (Webhook-Key-Id header); its secret is $WEBHOOK_SECRET (required)")
	fs.BoolVar(&o.idempotency, "idempotency", false, "require an Idempotency-Key header and use it as the message ID")
	fs.BoolVar(&o.traceHeader, "trace-headers", false, "store the traceparent and tracestate headers in the message's metadata")
	o.inbox.Register(fs, getenv, "")
	if err := brokercmd.Parse(fs, args); err != nil {
		return err
	}
	o.secret = getenv("WEBHOOK_SECRET")
	switch {
	case o.keyID == "":
		return errors.New("-key-id is required")
	case o.secret == "":
		return errors.New("WEBHOOK_SECRET is not set: export the shared secret of -key-id")
	}
	return o.inbox.Check()
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var o options
	return brokercmd.Run("webhook-inbox", stderr,
		func() error { return o.parse(args, getenv, stderr) },
		func(log *slog.Logger) error { return serve(ctx, &o, log) })
}

func serve(ctx context.Context, o *options, log *slog.Logger) error {
	pool, client, err := o.inbox.Open(ctx, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := webhook.Config{
		Keys:           []webhook.Key{{ID: o.keyID, Secret: []byte(o.secret), Scope: o.inbox.Scope()}},
		Decode:         webhook.Envelope(o.inbox.Source, o.inbox.Consumer),
		IdempotencyKey: o.idempotency,
	}
	if o.traceHeader {
		cfg.MetadataHeaders = webhook.TraceHeaders
	}
	h, err := webhook.NewHandler(client, cfg)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+o.path, h)
	srv := &http.Server{Addr: o.addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown) // lets in-flight accepts answer
	}()
	log.Info("webhook-inbox: listening", "addr", o.addr, "path", o.path, "key", o.keyID, "scope", o.inbox.Scope())
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

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
	"net/http"
	"time"

	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/webhook"
)

func main() { program.Main() }

type options struct {
	webhook.Config
	addr, path, keyID string
	secret            []byte
	traceHeaders      bool
}

var program = brokercmd.Program[options]{Name: "webhook-inbox", Flags: flags, Serve: serve}

// flags are the program's own flags; brokercmd adds the inbox's.
func flags(o *options) []brokercmd.Flag {
	return []brokercmd.Flag{
		brokercmd.Var(&o.addr, "addr", "127.0.0.1:8080", "listen address").Logged(),
		brokercmd.Var(&o.path, "path", "/webhook", "URL path of the endpoint").Logged(),
		brokercmd.Var(&o.keyID, "key-id", "", "the sender's key ID (Webhook-Key-Id header); its secret is $WEBHOOK_SECRET").Required().Logged(),
		brokercmd.Secret(&o.secret, "WEBHOOK_SECRET", "the shared secret of -key-id").Required(),
		brokercmd.Var(&o.IdempotencyKey, "idempotency", false, "require an Idempotency-Key header and use it as the message ID"),
		brokercmd.Var(&o.traceHeaders, "trace-headers", false, "store the traceparent and tracestate headers in the message's metadata"),
	}
}

// serve makes the handler of the configuration the flags set, and the
// server that runs it.
func serve(o *options, s *brokercmd.Session) (brokercmd.Runner, error) {
	o.Keys = []webhook.Key{{ID: o.keyID, Secret: o.secret, Scope: s.Scope()}}
	o.Decode = webhook.Envelope(s.Source, s.Consumer)
	if o.traceHeaders {
		o.MetadataHeaders = webhook.TraceHeaders
	}
	h, err := webhook.NewHandler(s.Client, o.Config)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+o.path, h)
	return brokercmd.RunFunc(func(ctx context.Context) error { return listen(ctx, o.addr, mux) }), nil
}

// listen serves h on addr until ctx ends, then lets the accepts in flight
// answer.
func listen(ctx context.Context, addr string, h http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/transport/webhook"
)

// A webhook endpoint: each sender's key decides its tenant, and a 2xx goes out
// only after the event is stored. The example serves it on a test server and
// sends one event twice; in production, serve it with http.ListenAndServe on a
// pool from DATABASE_URL.
func ExampleNewHandler() {
	ctx := context.Background()
	dsn, dropDB, err := inboxtest.NewDatabase(ctx) // production: os.Getenv("DATABASE_URL")
	if err != nil {
		log.Fatal(err)
	}
	defer dropDB()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{"orders.projection.v1"}})
	if err != nil {
		log.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef") // production: from your secret store
	h, err := webhook.NewHandler(client, webhook.Config{
		Keys:   []webhook.Key{{ID: "acme-2026", Secret: secret, Scope: inbox.Tenant("acme")}},
		Decode: webhook.Envelope("acme-shop", "orders.projection.v1"),
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/orders", h)
	srv := httptest.NewServer(mux) // production: http.ListenAndServe(addr, mux)
	defer srv.Close()

	body := []byte(`{"id":"evt-1","type":"order.created","version":1,"data":{"orderId":"o-1"}}`)
	for range 2 { // a sender's retry is a duplicate
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/webhooks/orders", bytes.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		webhook.Sign(req.Header, "acme-2026", secret, time.Now(), body)
		res, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		res.Body.Close()
		fmt.Println(res.StatusCode, res.Header.Get(webhook.HeaderOutcome))
	}
	// Output:
	// 202 accepted
	// 200 duplicate
}

// A sender signs each attempt with the current time (a fixed one here, so the
// output is stable).
func ExampleSign() {
	body := []byte(`{"id":"evt-1","type":"order.created","data":{"orderId":"o-1"}}`)
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/webhooks/orders", bytes.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef") // from your secret store
	webhook.Sign(req.Header, "acme-2026", secret, time.Unix(1767225600, 0), body)
	for _, h := range []string{webhook.HeaderKeyID, webhook.HeaderTimestamp, webhook.HeaderSignature} {
		fmt.Printf("%s: %s\n", h, req.Header.Get(h))
	}
	// Then send it; on 503 or a network error send it again (re-signed): a
	// stored event answers 200 duplicate.

	// Output:
	// Webhook-Key-Id: acme-2026
	// Webhook-Timestamp: 1767225600
	// Webhook-Signature: v1=84734fc91d7fe0451a20773dad5cc5dd031f46e777dee8c64652bd36ce39f7d8
}

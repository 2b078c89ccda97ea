package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

// A Consumer accepts each message of a stream into the inbox and acks it
// only after the accept committed. It needs a NATS server with JetStream
// (INBOX_TEST_NATS_URL, default nats://127.0.0.1:4222).
func Example() {
	ctx := context.Background()
	dsn, dropDB := exampleDSN()
	defer dropDB()
	pool, err := pgxpool.New(ctx, dsn)
	must(err)
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{"orders.projection.v1"}})
	must(err)

	nc, err := nats.Connect(exampleNATSURL()) // to set up streams and publish
	must(err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	must(err)
	id := randomID() // unique stream names: examples and tests share the server
	orders, dead := "EXAMPLE_ORDERS_"+id, "EXAMPLE_DEAD_"+id
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: orders, Subjects: []string{"example." + id + ".orders"}})
	must(err)
	defer js.DeleteStream(ctx, orders)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: dead, Subjects: []string{"example." + id + ".dead"}})
	must(err)
	defer js.DeleteStream(ctx, dead)

	consumer, err := pgnats.NewConsumer(client, pgnats.Config{
		URL:               exampleNATSURL(),
		Scope:             inbox.Tenant("acme"), // the stream's tenant: configuration, never payload
		Stream:            orders,
		Durable:           "orders-inbox",
		DeadLetterSubject: "example." + id + ".dead",
		Decode: func(m jetstream.Msg) (inbox.Message, error) {
			return inbox.Message{
				// MessageID stays empty: the Nats-Msg-Id header is used.
				Identity:      inbox.Identity{Source: "shop", Consumer: "orders.projection.v1"},
				EventType:     "order.created",
				SchemaVersion: 1,
				Payload:       json.RawMessage(m.Data()),
			}, nil
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	must(err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- consumer.Run(runCtx) }()

	_, err = js.Publish(ctx, "example."+id+".orders", []byte(`{"orderId":"o-1"}`), jetstream.WithMsgID("evt-1"))
	must(err)
	var status string
	for i := 0; status == "" && i < 3000; i++ { // up to 30s
		time.Sleep(10 * time.Millisecond)
		_ = pool.QueryRow(ctx, `SELECT status FROM pginbox_receipts_live WHERE message_id = 'evt-1'`).Scan(&status)
	}
	fmt.Println("evt-1:", status)
	stop()
	must(<-done)
	// Output: evt-1: PENDING
}

func exampleNATSURL() string {
	if v := os.Getenv("INBOX_TEST_NATS_URL"); v != "" {
		return v
	}
	return nats.DefaultURL
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// A relay publishing the outbox to JetStream: each event goes to the
// subject its Destination names with Nats-Msg-Id = event ID, so the stream
// drops a re-publish after a relay crash. Keep the stream's duplicate window
// longer than the relay's Lease plus PublishTimeout.
func ExampleNewPublisher() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	pub, err := pgnats.NewPublisher(pgnats.PublisherConfig{URL: "nats://127.0.0.1:4222"})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{Lease: time.Minute}) // stream Duplicates: 2m by default
	if err != nil {
		panic(err)
	}
	if err := relay.Run(ctx); err != nil {
		panic(err)
	}
}

package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
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
	// Accept notifies the workers (NotifyChannel) once the message is
	// stored: the example listens too, to read the receipt then.
	wake, err := pool.Acquire(ctx)
	must(err)
	defer wake.Release()
	_, err = wake.Exec(ctx, "LISTEN "+inbox.NotifyChannel)
	must(err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- consumer.Run(runCtx) }()

	_, err = js.Publish(ctx, "example."+id+".orders", []byte(`{"orderId":"o-1"}`), jetstream.WithMsgID("evt-1"))
	must(err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = wake.Conn().WaitForNotification(wctx)
	cancel()
	must(err)
	var status string
	err = pool.QueryRow(ctx, `SELECT status FROM pginbox_receipts_live WHERE message_id = 'evt-1'`).Scan(&status)
	must(err)
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
	dsn, dropDB := exampleDSN() // production: os.Getenv("DATABASE_URL")
	defer dropDB()
	pool, err := pgxpool.New(ctx, dsn)
	must(err)
	defer pool.Close()

	nc, err := nats.Connect(exampleNATSURL()) // to set up the stream and read it
	must(err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	must(err)
	id := randomID() // unique names: examples and tests share the server
	subject := "example." + id + ".billing"
	// File storage (the default): a publish is acknowledged once stored.
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EXAMPLE_BILLING_" + id, Subjects: []string{subject}})
	must(err)
	defer js.DeleteStream(ctx, "EXAMPLE_BILLING_"+id)

	pub, err := pgnats.NewPublisher(pgnats.PublisherConfig{URL: exampleNATSURL()})
	must(err)
	defer pub.Close()
	// The event is emitted in the transaction that changes the invoice.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Emit(ctx, tx, outbox.Event{Source: "billing", Destination: subject, Type: "invoice.paid",
			SchemaVersion: 1, Payload: map[string]string{"invoiceId": "i-1"}})
		return err
	})
	must(err)
	relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{
		Lease:  time.Minute, // stream Duplicates: 2m by default
		Logger: slog.New(slog.DiscardHandler),
	})
	must(err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()

	// What a consumer of the stream gets: Next waits for the message.
	reader, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	must(err)
	msg, err := reader.Next(jetstream.FetchMaxWait(30 * time.Second))
	must(err)
	h := msg.Headers()
	fmt.Println(h.Get(jetstream.MsgIDHeader) != "", h.Get(pgnats.HeaderSource), h.Get(pgnats.HeaderEventType), string(msg.Data()))
	stop()
	must(<-done)
	// Output: true billing invoice.paid {"invoiceId":"i-1"}
}

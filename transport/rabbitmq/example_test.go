package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

// A consumer for one tenant's queue: the queue decides the tenant, the
// producer's message-id property is the message ID. The example needs a
// RabbitMQ broker (INBOX_TEST_RABBITMQ_URL, default on 127.0.0.1:5672) and
// uses a fresh database and queue names of its own; in production, use a
// pool from DATABASE_URL and run until SIGINT (signal.NotifyContext).
func ExampleNewConsumer() {
	ctx := context.Background()
	pool, dropDB := examplePool(ctx)
	defer dropDB()
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{"orders.projection.v1"}})
	if err != nil {
		log.Fatal(err)
	}
	url := exampleURL()
	queue := exampleName("acme.orders")
	declare := func(ch *amqp.Channel) error { // runs after every (re)connect
		if err := ch.ExchangeDeclare(queue+".dlx", amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return err
		}
		// A quorum queue: retries are bounded by its delivery count.
		_, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		return err
	}
	c, err := rabbitmq.NewConsumer(client, rabbitmq.Config{
		URL:                url,
		Queue:              queue,
		Scope:              inbox.Tenant("acme"),
		DeadLetterExchange: queue + ".dlx",
		Setup:              declare,
		Decode: func(d amqp.Delivery) (inbox.Message, error) {
			if d.MessageId == "" {
				return inbox.Message{}, errors.New("no message-id property") // dead-lettered, reason "decode"
			}
			return inbox.Message{
				Identity:      inbox.Identity{Source: "shop", Consumer: "orders.projection.v1", MessageID: d.MessageId},
				EventType:     d.Type,
				SchemaVersion: 1,
				Payload:       d.Body,
			}, nil
		},
		// Reconnects and dead letters are warnings: keep them visible.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		log.Fatal(err)
	}

	// A producer's message, with its event ID as the message-id property.
	// It waits in the queue until the consumer runs.
	conn, ch := exampleChannel(url)
	defer conn.Close()
	defer cleanUp(ch, queue)
	if err := declare(ch); err != nil {
		log.Fatal(err)
	}
	err = ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{
		MessageId: "evt-1", Type: "order.created", ContentType: "application/json", DeliveryMode: amqp.Persistent,
		Body: []byte(`{"orderId":"o-1"}`),
	})
	if err != nil {
		log.Fatal(err)
	}

	// Accept notifies the workers (NotifyChannel) once the message is
	// stored: the example listens too, to read the receipt then.
	wake, err := pool.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer wake.Release()
	_, err = wake.Exec(ctx, "LISTEN "+inbox.NotifyChannel)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }() // reconnects until the context ends

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = wake.Conn().WaitForNotification(wctx)
	cancel()
	if err != nil {
		log.Fatal(err)
	}
	var status string
	err = pool.QueryRow(ctx, `SELECT status FROM pginbox_receipts_live WHERE message_id = 'evt-1'`).Scan(&status)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("evt-1:", status)
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: evt-1: PENDING
}

// A relay publishing the outbox to RabbitMQ: each event goes to the queue its
// Destination names (through the default exchange), persistent and
// confirmed, with the event ID as the message-id property, so the receiving
// consumer (DecodeEvent) deduplicates. Same broker and database as above.
func ExampleNewPublisher() {
	ctx := context.Background()
	pool, dropDB := examplePool(ctx)
	defer dropDB()
	defer pool.Close()
	url := exampleURL()
	queue := exampleName("billing.v1")
	declare := func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		return err
	}
	pub, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{
		URL:   url,
		Setup: declare, // runs after every (re)connect
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	conn, ch := exampleChannel(url)
	defer conn.Close()
	defer cleanUp(ch, queue)
	if err := declare(ch); err != nil { // the reader's side; the Publisher's Setup declares it too
		log.Fatal(err)
	}

	// The event is emitted in the transaction that changes the invoice.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Emit(ctx, tx, outbox.Event{Source: "billing", Destination: queue, Type: "invoice.paid",
			SchemaVersion: 1, Payload: map[string]string{"invoiceId": "i-1"}})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()

	// What a consumer of the queue gets.
	deliveries, err := ch.ConsumeWithContext(ctx, queue, "", true, false, false, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	var d amqp.Delivery
	select {
	case d = <-deliveries:
	case <-time.After(30 * time.Second):
		log.Fatal("nothing published within 30s")
	}
	m, err := rabbitmq.DecodeEvent("billing.projection.v1")(d)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Source, m.EventType, d.DeliveryMode == amqp.Persistent, string(d.Body))
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: billing invoice.paid true {"invoiceId":"i-1"}
}

func exampleURL() string {
	if v := os.Getenv("INBOX_TEST_RABBITMQ_URL"); v != "" {
		return v
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// exampleName is name made unique: examples and tests share the broker.
func exampleName(name string) string {
	return "example-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + name
}

func exampleChannel(url string) (*amqp.Connection, *amqp.Channel) {
	conn, err := amqp.Dial(url)
	if err != nil {
		log.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	return conn, ch
}

// cleanUp deletes the example's queue and dead-letter exchange.
func cleanUp(ch *amqp.Channel, queue string) {
	_, _ = ch.QueueDelete(queue, false, false, false)
	_ = ch.ExchangeDelete(queue+".dlx", false, false)
}

// examplePool is a pool on a fresh migrated database, and its drop.
func examplePool(ctx context.Context) (*pgxpool.Pool, func()) {
	dsn, drop, err := inboxtest.NewDatabase(ctx) // production: os.Getenv("DATABASE_URL")
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		drop()
		log.Fatal(err)
	}
	return pool, drop
}

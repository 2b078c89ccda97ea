package rabbitmq_test

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

// A consumer for one tenant's queue: the queue decides the tenant, the
// producer's message-id property is the message ID.
func ExampleNewConsumer() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{"orders.projection.v1"}})
	if err != nil {
		log.Fatal(err)
	}
	c, err := rabbitmq.NewConsumer(client, rabbitmq.Config{
		URL:                "amqp://guest:guest@127.0.0.1:5672/",
		Queue:              "acme.orders", // a quorum queue: retries are bounded by its delivery count
		Scope:              inbox.Tenant("acme"),
		DeadLetterExchange: "acme.orders.dlx",
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
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil { // reconnects until ctx ends
		log.Fatal(err)
	}
}

// A relay publishing the outbox to RabbitMQ with publisher confirms: each
// event goes to the queue its Destination names, with the event ID as the
// message-id property, so the receiving consumer (DecodeEvent) deduplicates.
func ExampleNewPublisher() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	pub, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{
		URL: "amqp://guest:guest@127.0.0.1:5672/",
		Setup: func(ch *amqp.Channel) error { // runs after every (re)connect
			_, err := ch.QueueDeclare("billing.v1", true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
			return err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{})
	if err != nil {
		log.Fatal(err)
	}
	if err := relay.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

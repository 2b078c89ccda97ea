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

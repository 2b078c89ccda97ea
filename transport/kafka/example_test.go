package kafka_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/kafka"
)

// A group member for one tenant's topic: the topic decides the tenant, the
// record key is the producer's event ID.
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
	c, err := kafka.NewConsumer(client, kafka.Config{
		Brokers:         []string{"127.0.0.1:9092"},
		Topics:          []string{"acme.orders"},
		Group:           "acme-orders-inbox",
		Scope:           inbox.Tenant("acme"),
		DeadLetterTopic: "acme.orders.dead",
		Decode: func(r *kgo.Record) (inbox.Message, error) {
			return inbox.Message{
				Identity:      inbox.Identity{Source: "shop", Consumer: "orders.projection.v1", MessageID: string(r.Key)},
				EventType:     "order.created",
				SchemaVersion: 1,
				Payload:       r.Value,
			}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A relay producing the outbox to Kafka: each event goes to the topic its
// Destination names, keyed by its ordering key, with the event ID in a
// header, so the receiving consumer (DecodeEvent) deduplicates.
func ExampleNewPublisher() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers:       []string{"127.0.0.1:9092"},
		ClientOptions: []kgo.Opt{kgo.ClientID("orders-relay")},
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

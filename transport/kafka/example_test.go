package kafka_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/kafka"
)

// A group member for one tenant's topic: the topic decides the tenant, the
// record key is the producer's event ID. The example runs on an in-process
// cluster (kfake) and a fresh database; in production, list your brokers and
// use a pool from DATABASE_URL, and run until SIGINT
// (signal.NotifyContext).
func ExampleNewConsumer() {
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "acme.orders", "acme.orders.dead"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	pool, dropDB := examplePool(ctx)
	defer dropDB()
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{"orders.projection.v1"}})
	if err != nil {
		log.Fatal(err)
	}
	c, err := kafka.NewConsumer(client, kafka.Config{
		Brokers:         cluster.ListenAddrs(), // production: []string{"kafka-1:9092", ...}
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
		Logger: slog.New(slog.DiscardHandler),
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
	go func() { done <- c.Run(runCtx) }()

	// A producer's record, keyed by its event ID.
	prod, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "acme.orders", Key: []byte("evt-1"), Value: []byte(`{"orderId":"o-1"}`)}).FirstErr(); err != nil {
		log.Fatal(err)
	}
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

// A relay producing the outbox to Kafka: each event goes to the topic its
// Destination names, keyed by its ordering key, with the event ID in a
// header, so the receiving consumer (DecodeEvent) deduplicates. The example
// runs on an in-process cluster (kfake) and a fresh database.
func ExampleNewPublisher() {
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "acme.orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	pool, dropDB := examplePool(ctx)
	defer dropDB()
	defer pool.Close()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers:       cluster.ListenAddrs(), // production: []string{"kafka-1:9092", ...}
		ClientOptions: []kgo.Opt{kgo.ClientID("orders-relay")},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()

	// The event is emitted in the transaction that changes the order.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Emit(ctx, tx, outbox.Event{Source: "shop", Destination: "acme.orders", Type: "order.created",
			SchemaVersion: 1, OrderingKey: "o-1", Payload: map[string]string{"orderId": "o-1"}})
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

	// What a consumer of the topic reads.
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("acme.orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rec *kgo.Record
	for rec == nil && fctx.Err() == nil {
		if recs := cl.PollFetches(fctx).Records(); len(recs) > 0 {
			rec = recs[0]
		}
	}
	if rec == nil {
		log.Fatal("nothing produced within 30s")
	}
	m, err := kafka.DecodeEvent("orders.projection.v1")(rec)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(rec.Key), m.Source, m.EventType, string(rec.Value))
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: o-1 shop order.created {"orderId":"o-1"}
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

package redisstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/redisstream"
)

// A Consumer accepts each entry of a stream into the inbox and acknowledges
// it only after the accept committed. It needs Redis (INBOX_TEST_REDIS_ADDR,
// default 127.0.0.1:6379).
func Example() {
	ctx := context.Background()
	dsn, dropDB := exampleDSN()
	defer dropDB()
	pool, err := pgxpool.New(ctx, dsn)
	must(err)
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{"orders.projection.v1"}})
	must(err)

	rdb := redis.NewClient(&redis.Options{Addr: exampleRedisAddr()})
	defer rdb.Close()
	id := randomID() // unique keys: examples and tests share the server
	stream, dead := "example:"+id+":orders", "example:"+id+":dead"
	defer rdb.Del(ctx, stream, dead)

	consumer, err := redisstream.NewConsumer(client, redisstream.Config{
		Redis:            rdb,
		Scope:            inbox.Tenant("acme"), // the stream's tenant: configuration, never an entry
		Stream:           stream,
		Group:            "orders-inbox",
		DeadLetterStream: dead,
		Decode: func(m redis.XMessage) (inbox.Message, error) {
			payload, ok := m.Values["payload"].(string)
			if !ok {
				return inbox.Message{}, errors.New("no payload field")
			}
			return inbox.Message{
				// MessageID stays empty: the message_id field is used.
				Identity:      inbox.Identity{Source: "shop", Consumer: "orders.projection.v1"},
				EventType:     "order.created",
				SchemaVersion: 1,
				Payload:       json.RawMessage(payload),
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

	must(rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{
		"message_id": "evt-1", "payload": `{"orderId":"o-1"}`,
	}}).Err())
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

func exampleRedisAddr() string {
	if v := os.Getenv("INBOX_TEST_REDIS_ADDR"); v != "" {
		return v
	}
	return "127.0.0.1:6379"
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// A relay adding the outbox's events to Redis streams, one stream per
// Destination, with the event ID in the message_id field. Redis does not
// deduplicate: the receiving Consumer's inbox drops a copy a relay crash
// sent twice.
func ExampleNewPublisher() {
	ctx := context.Background()
	dsn, dropDB := exampleDSN() // production: os.Getenv("DATABASE_URL")
	defer dropDB()
	pool, err := pgxpool.New(ctx, dsn)
	must(err)
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Addr: exampleRedisAddr()})
	defer rdb.Close()
	stream := "example:" + randomID() + ":billing" // unique: examples and tests share the server
	defer rdb.Del(ctx, stream)
	pub, err := redisstream.NewPublisher(redisstream.PublisherConfig{
		Redis:  rdb,
		MaxLen: 1_000_000,
		// The test Redis keeps no append-only file. Production leaves this
		// false and runs Redis with appendonly yes (appendfsync always or
		// everysec): NewPublisher refuses a Redis that would lose an entry
		// it answered for.
		AllowNotDurable: true,
	})
	must(err)
	// The event is emitted in the transaction that changes the invoice.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Emit(ctx, tx, outbox.Event{Source: "billing", Destination: stream, Type: "invoice.paid",
			SchemaVersion: 1, Payload: map[string]string{"invoiceId": "i-1"}})
		return err
	})
	must(err)
	relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{Logger: slog.New(slog.DiscardHandler)})
	must(err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()

	// What a consumer of the stream gets: the read blocks until an entry
	// is there (redis.Nil after 30s).
	read, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, "0"}, Count: 1, Block: 30 * time.Second}).Result()
	must(err)
	entries := read[0].Messages
	m, err := redisstream.DecodeEvent("billing.projection.v1")(entries[0])
	must(err)
	fmt.Println(entries[0].Values[redisstream.DefaultIDField] != "", m.Source, m.EventType, string(m.Payload.(json.RawMessage)))
	stop()
	must(<-done)
	// Output: true billing invoice.paid {"invoiceId":"i-1"}
}

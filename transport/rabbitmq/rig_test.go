package rabbitmq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

const (
	testSource   = "orders"
	testConsumer = "drill.v1"
)

// rig is a private topology on the shared broker: a quorum queue, a fanout
// dead-letter exchange and a queue bound to it, all deleted at test end.
type rig struct {
	url        string
	conn       *amqp.Connection
	pub        *amqp.Channel // confirm mode
	queue, dlx string
	dlq        string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigAt(t, brokertest.Require(t, brokertest.RabbitMQ))
}

// newRigAt is newRig on the broker at url.
func newRigAt(t testing.TB, url string) *rig {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("pginbox-test-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	r := &rig{url: url, conn: conn, queue: name, dlx: name + ".dlx", dlq: name + ".dead"}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	must(t, ch.ExchangeDeclare(r.dlx, amqp.ExchangeFanout, true, false, false, false, nil))
	_, err = ch.QueueDeclare(r.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	must(t, err)
	_, err = ch.QueueDeclare(r.dlq, true, false, false, false, nil)
	must(t, err)
	must(t, ch.QueueBind(r.dlq, "", r.dlx, false, nil))
	must(t, ch.Close())
	r.pub, err = conn.Channel()
	must(t, err)
	must(t, r.pub.Confirm(false))
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(r.queue, false, false, false)
			_, _ = ch.QueueDelete(r.dlq, false, false, false)
			_ = ch.ExchangeDelete(r.dlx, false, false)
		}
		conn.Close()
	})
	return r
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// publish sends one message to the queue and waits for the broker's confirm.
// An empty id sends no message-id property.
func (r *rig) publish(t testing.TB, id, body string) {
	t.Helper()
	conf, err := r.pub.PublishWithDeferredConfirmWithContext(context.Background(), "", r.queue, true, false, amqp.Publishing{
		MessageId: id, Type: drill.EventType, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(body),
	})
	must(t, err)
	if !conf.Wait() {
		t.Fatalf("broker nacked the publish of %s", id)
	}
}

// depth is the number of ready messages in queue.
func (r *rig) depth(t testing.TB, queue string) int {
	t.Helper()
	ch, err := r.conn.Channel()
	must(t, err)
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil) // passive: arguments are not compared
	must(t, err)
	return q.Messages
}

// dead takes every message from the dead-letter queue.
func (r *rig) dead(t testing.TB) []amqp.Delivery {
	t.Helper()
	ch, err := r.conn.Channel()
	must(t, err)
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(r.dlq, true)
		must(t, err)
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// decode is the test's mapping: message-id property, type property, JSON body.
func decode(d amqp.Delivery) (inbox.Message, error) {
	if d.MessageId == "" {
		return inbox.Message{}, errors.New("no message-id property: the producer must set its event ID there")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: testSource, Consumer: testConsumer, MessageID: d.MessageId},
		EventType:     d.Type,
		SchemaVersion: drill.SchemaVersion,
		Payload:       d.Body,
	}, nil
}

func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{testConsumer}})
	must(t, err)
	return c
}

// config is the consumer config of the rig with fast retries.
func (r *rig) config(t testing.TB, url string) rabbitmq.Config {
	return rabbitmq.Config{
		Logger:             slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		URL:                url,
		Queue:              r.queue,
		Scope:              inbox.Tenant("tenant-a"),
		Decode:             decode,
		DeadLetterExchange: r.dlx,
		RetryDelay:         20 * time.Millisecond,
		MaxRetryDelay:      200 * time.Millisecond,
	}
}

// run starts c and returns a function that stops it.
func run(t testing.TB, c *rabbitmq.Consumer) (stop func()) { return drill.Run(t, c.Run) }

// logBuffer is a slog destination the test can read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

//go:build unix

package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/conformance"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

func TestConsumerConformance(t *testing.T) {
	t.Parallel()
	conformance.RunConsumer(t, driver{})
}

func TestPublisherConformance(t *testing.T) {
	t.Parallel()
	conformance.RunPublisher(t, driver{})
}

// driver runs the conformance suites on RabbitMQ quorum queues.
type driver struct{}

func (driver) SharedAddr(t *testing.T) string {
	u, err := url.Parse(brokertest.Require(t, brokertest.RabbitMQ))
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func amqpURL(addr string) string { return "amqp://guest:guest@" + addr + "/" }

// PrivateBroker is a rabbitmq-server node of the test's own (its own node
// name, ports and database directory); quorum queues store a message on
// disk before the broker confirms it. It is ready when an AMQP connection
// opens, however long the node takes to boot (see answersAMQP).
func (driver) PrivateBroker(t *testing.T) conformance.Broker {
	b := conformance.StartProcessReady(t, "/usr/lib/rabbitmq/bin/rabbitmq-server", "INBOX_TEST_RABBITMQ_SERVER", "/usr/lib/rabbitmq/bin/rabbitmq-server", nil,
		func(port int, dir string) []string {
			return []string{
				"RUNNING_UNDER_SYSTEMD=true", // run in the foreground: the kill reaches the broker itself
				"RABBITMQ_NODENAME=pginbox-test-" + strconv.Itoa(port) + "@localhost",
				"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
				"RABBITMQ_NODE_PORT=" + strconv.Itoa(port),
				"RABBITMQ_DIST_PORT=" + strconv.Itoa(distPort(port)),
				"RABBITMQ_MNESIA_BASE=" + dir + "/mnesia",
				"RABBITMQ_LOG_BASE=" + dir + "/log",
				"RABBITMQ_ENABLED_PLUGINS_FILE=" + dir + "/enabled_plugins",
				"RABBITMQ_ENABLED_PLUGINS=",
				"RABBITMQ_CONFIG_FILE=" + dir + "/none",
				"RABBITMQ_ADVANCED_CONFIG_FILE=" + dir + "/none.config",
			}
		}, answersAMQP)
	private.Store(b.Addr(), true)
	return b
}

// answersAMQP reports whether the node at addr opens an AMQP connection:
// a node booting on a loaded machine may take minutes, and the cases talk
// AMQP to it.
func answersAMQP(addr string) error {
	conn, err := amqp.Dial(amqpURL(addr))
	if err != nil {
		return err
	}
	return conn.Close()
}

// distPort is the node's Erlang distribution port: the AMQP port's
// neighbourhood is taken by the OS at random, so this one is derived away
// from it and below the ephemeral range, never the shared node's 25672.
func distPort(port int) int {
	if p := 20000 + port%10000; p != 25672 {
		return p
	}
	return 29999
}

// private holds the addresses of the private brokers (PrivateBroker).
var private sync.Map

// raRegistryFlush is how long a private node is left idle after a quorum
// queue is declared. RabbitMQ 3.10's Ra (2.2) records a queue's Ra server
// in a dets table (names.dets, auto_save 500 ms) that is written to disk
// only once it has not been accessed for 500 ms, and every lookup by name
// accesses it: a node SIGKILLed while busy since the declare restarts
// without the registration, RabbitMQ then starts the queue's Ra server
// afresh (a new directory, an empty log) and it never elects a leader
// ("leader call - leader not known"), the queue's messages orphaned. The
// drill is about a crash mid-stream, not that broker bug, so the queue
// exists on disk before traffic starts, as a long-declared queue does.
const raRegistryFlush = 1500 * time.Millisecond

// settleDeclare waits out raRegistryFlush on a private broker.
func settleDeclare(addr string) {
	if _, ok := private.Load(addr); ok {
		time.Sleep(raRegistryFlush)
	}
}

func (driver) Skip(conformance.Case) string { return "" } // every case applies

func (driver) Deduplicates() bool { return false } // a republished event is a second message

func (driver) NewChannel(t *testing.T, addr string) conformance.Channel {
	c := &channel{r: newRigAt(t, amqpURL(addr))}
	settleDeclare(addr)
	return c
}

func (driver) NewDestination(t testing.TB, addr string) conformance.Destination {
	c := &channel{r: newRigAt(t, amqpURL(addr))}
	settleDeclare(addr)
	return c
}

func (driver) NewPublisher(t testing.TB, addr string) outbox.Publisher {
	return newPublisher(t, amqpURL(addr), rabbitmq.PublisherConfig{})
}

// channel is a rig seen by the suite. AMQP does not report a queue's
// unacknowledged messages (only the management API or rabbitmqctl do, too
// slow to poll), so Unsettled adds to the ready messages those the
// consumers did not report settled (acked or dead-lettered).
type channel struct {
	r *rig

	mu        sync.Mutex
	sent      int
	consumers []*rabbitmq.Consumer
	dead      []amqp.Delivery // taken from the dead-letter queue so far
	read      []amqp.Delivery // taken from the queue so far (publisher cases)
}

func (c *channel) Send(t testing.TB, id, payload string) {
	c.redial(t)
	bounded(t, "publishing "+id, func() (struct{}, error) {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		conf, err := c.r.pub.PublishWithDeferredConfirmWithContext(ctx, "", c.r.queue, true, false, amqp.Publishing{
			MessageId: id, Type: drill.EventType, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(payload),
		})
		if err != nil {
			return struct{}{}, err
		}
		ok, err := conf.WaitContext(ctx)
		if err == nil && !ok {
			err = errors.New("the broker nacked it")
		}
		return struct{}{}, err
	})
	c.mu.Lock()
	c.sent++
	c.mu.Unlock()
}

// decodeConformance is the rig's decode failing an empty body.
func decodeConformance(d amqp.Delivery) (inbox.Message, error) {
	if len(d.Body) == 0 {
		return inbox.Message{}, errors.New("empty body")
	}
	if d.MessageId == "" {
		return inbox.Message{}, errors.New("no message-id property")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: conformance.Source, Consumer: conformance.Consumer, MessageID: d.MessageId},
		EventType:     conformance.EventType,
		SchemaVersion: conformance.SchemaVersion,
		Payload:       d.Body,
	}, nil
}

func (c *channel) Start(t testing.TB, s conformance.Setup) (func(), error) {
	cfg := c.r.config(t, amqpURL(s.Addr))
	cfg.Logger = s.Log
	cfg.Scope = s.Scope
	cfg.Decode = decodeConformance
	cfg.DeliveryLimit = s.DeliveryLimit
	if cfg.DeliveryLimit == 0 {
		cfg.DeliveryLimit = 1000 // outlasts any outage a case makes
	}
	consumer, err := rabbitmq.NewConsumer(s.Accepter, cfg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.consumers = append(c.consumers, consumer)
	c.mu.Unlock()
	return drill.Run(t, consumer.Run), nil
}

// redial replaces the rig's connection after a broker restart closed it.
func (c *channel) redial(t testing.TB) {
	t.Helper()
	if !c.r.conn.IsClosed() {
		return
	}
	var conn *amqp.Connection
	drill.Eventually(t, 60*time.Second, "a connection to the restarted broker", func() bool {
		var err error
		conn, err = amqp.Dial(c.r.url)
		return err == nil
	})
	t.Cleanup(func() { _ = conn.Close() })
	pub, err := conn.Channel()
	must(t, err)
	must(t, pub.Confirm(false))
	c.r.conn, c.r.pub = conn, pub
}

func (c *channel) Unsettled(t testing.TB) int {
	c.redial(t)
	ready := bounded(t, "the queue's depth", func() (int, error) {
		ch, err := c.r.conn.Channel()
		if err != nil {
			return 0, err
		}
		defer ch.Close()
		q, err := ch.QueueDeclarePassive(c.r.queue, true, false, false, false, nil)
		return q.Messages, err
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	open := int64(c.sent)
	for _, k := range c.consumers {
		s := k.Stats()
		open -= s.Acked + s.DeadLettered
	}
	return max(ready, int(open))
}

func (c *channel) DeadLetters(t testing.TB) []conformance.DeadLetter {
	c.redial(t)
	fresh := bounded(t, "the dead letters", func() ([]amqp.Delivery, error) { return getAll(c.r.conn, c.r.dlq) })
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead = append(c.dead, fresh...)
	var out []conformance.DeadLetter
	for _, d := range c.dead {
		reason, _ := d.Headers["x-pginbox-reason"].(string)
		receipt, _ := d.Headers["x-pginbox-receipt"].(string)
		out = append(out, conformance.DeadLetter{MessageID: d.MessageId, Reason: reason, Payload: string(d.Body), Receipt: receipt})
	}
	return out
}

func (c *channel) Name() string { return c.r.queue }

// Read takes what the queue holds (keeping it for later calls), checks
// the AMQP properties every published event carries, and decodes it.
func (c *channel) Read(t testing.TB) []conformance.Delivered {
	c.redial(t)
	fresh := bounded(t, "reading the queue", func() ([]amqp.Delivery, error) { return getAll(c.r.conn, c.r.queue) })
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = append(c.read, fresh...)
	decode := rabbitmq.DecodeEvent(testConsumer)
	var out []conformance.Delivered
	for _, d := range c.read {
		m, err := decode(d)
		if err != nil {
			t.Fatal(fmt.Errorf("delivery %s: %w", d.MessageId, err))
		}
		if d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent || d.Timestamp.IsZero() {
			t.Fatalf("delivery %s: content type %q, delivery mode %d, timestamp %v; want JSON, persistent, set",
				d.MessageId, d.ContentType, d.DeliveryMode, d.Timestamp)
		}
		key, _ := d.Headers[rabbitmq.HeaderOrderingKey].(string)
		out = append(out, conformance.Delivered{ID: m.MessageID, OrderingKey: key, Source: m.Source, EventType: m.EventType,
			SchemaVersion: m.SchemaVersion, Metadata: m.Metadata})
	}
	return out
}

// rpcTimeout bounds each broker call of the driver: an AMQP call on a
// quorum queue without a leader waits for one with no deadline of its own.
const rpcTimeout = 30 * time.Second

// bounded is fn's result; it fails t when fn fails or has not returned
// within rpcTimeout (fn is left to the connection's close at test end).
func bounded[T any](t testing.TB, what string, fn func() (T, error)) T {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.v
	case <-time.After(rpcTimeout):
		t.Fatalf("%s: no answer from the broker within %v", what, rpcTimeout)
		panic("unreachable")
	}
}

// getAll takes every message from queue.
func getAll(conn *amqp.Connection, queue string) ([]amqp.Delivery, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil || !ok {
			return out, err
		}
		out = append(out, d)
	}
}

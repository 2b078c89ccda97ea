//go:build unix

package rabbitmq_test

import (
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
// disk before the broker confirms it.
func (driver) PrivateBroker(t *testing.T) conformance.Broker {
	return conformance.StartProcessEnv(t, "/usr/lib/rabbitmq/bin/rabbitmq-server", "INBOX_TEST_RABBITMQ_SERVER", "/usr/lib/rabbitmq/bin/rabbitmq-server", nil,
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
		})
}

// distPort is the node's Erlang distribution port: the AMQP port's
// neighbourhood is taken by the OS at random, so this one is derived away
// from it and below the ephemeral range.
func distPort(port int) int { return 20000 + port%10000 }

func (driver) Skip(c conformance.Case) string {
	if c == conformance.PublisherRestart || c == conformance.ConsumerRestart {
		// Not covered yet: on this machine a private node's quorum queue had
		// no leader for minutes after a SIGKILL restart ("leader call -
		// leader not known"; the publisher case hung until the package
		// timed out, the consumer case waited past its minute).
		return "a private RabbitMQ node's quorum queue found no leader for minutes after a SIGKILL restart (under investigation)"
	}
	return ""
}

func (driver) Deduplicates() bool { return false } // a republished event is a second message

func (driver) NewChannel(t *testing.T, addr string) conformance.Channel {
	return &channel{r: newRigAt(t, amqpURL(addr))}
}

func (driver) NewDestination(t testing.TB, addr string) conformance.Destination {
	return &channel{r: newRigAt(t, amqpURL(addr))}
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
	c.r.publish(t, id, payload)
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
	ready := c.r.depth(t, c.r.queue)
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
	fresh := c.r.dead(t)
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
	ch, err := c.r.conn.Channel()
	must(t, err)
	defer ch.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		d, ok, err := ch.Get(c.r.queue, true)
		must(t, err)
		if !ok {
			break
		}
		c.read = append(c.read, d)
	}
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

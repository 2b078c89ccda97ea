//go:build unix

package redisstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/conformance"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/redisstream"
)

func TestConsumerConformance(t *testing.T) {
	t.Parallel()
	conformance.RunConsumer(t, &driver{})
}

func TestPublisherConformance(t *testing.T) {
	t.Parallel()
	conformance.RunPublisher(t, &driver{})
}

// driver runs the conformance suites on Redis streams.
type driver struct {
	redis conformance.RedisServers // the private, persisting servers
}

func (d *driver) SharedAddr(t *testing.T) string { return redisAddr(t) }

// PrivateBroker is a redis-server persisting every write before it answers
// (appendfsync always), as production needs.
func (d *driver) PrivateBroker(t *testing.T) conformance.Broker { return d.redis.Start(t) }

func (d *driver) Skip(conformance.Case) string { return "" }

func (d *driver) Deduplicates() bool { return false } // XADD keeps every copy

func (d *driver) NewChannel(t *testing.T, addr string) conformance.Channel {
	return channel{newEnv(t, addr)}
}

func (d *driver) NewDestination(t testing.TB, addr string) conformance.Destination {
	return channel{newEnv(t, addr)}
}

// NewPublisher checks persistence on private servers; the shared test Redis
// has none (TestPublisherRefusesVolatileRedis covers the refusal).
func (d *driver) NewPublisher(t testing.TB, addr string) outbox.Publisher {
	p, err := redisstream.NewPublisher(redisstream.PublisherConfig{Redis: newRedis(t, addr), AllowNotDurable: !d.redis.Started(addr)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type channel struct{ e *env }

func (c channel) Send(t testing.TB, id, payload string) { c.e.add(t, id, payload) }

func (c channel) Start(t testing.TB, s conformance.Setup) (func(), error) {
	cfg := c.e.config(newRedis(t, s.Addr), s.Log)
	cfg.Scope = s.Scope
	// An accept and a dead letter get half of ClaimIdle: 100ms is too
	// short on a loaded machine running the suite's cases in parallel.
	cfg.ClaimIdle = time.Second
	cfg.DeliveryLimit = int64(s.DeliveryLimit)
	if cfg.DeliveryLimit == 0 {
		cfg.DeliveryLimit = 1000 // outlasts any outage a case makes
	}
	consumer, err := redisstream.NewConsumer(s.Accepter, cfg)
	if err != nil {
		return nil, err
	}
	return drill.Run(t, consumer.Run), nil
}

func (c channel) Unsettled(t testing.TB) int { return c.e.unsettled(t) }

func (c channel) DeadLetters(t testing.TB) []conformance.DeadLetter {
	var out []conformance.DeadLetter
	for _, m := range c.e.deadLetters(t) {
		str := func(f string) string { s, _ := m.Values[f].(string); return s }
		out = append(out, conformance.DeadLetter{
			MessageID: str(redisstream.DefaultIDField),
			Reason:    str(redisstream.FieldReason),
			Payload:   str("payload"),
			Receipt:   str(redisstream.FieldReceipt),
		})
	}
	return out
}

func (c channel) Name() string { return c.e.stream }

func (c channel) Read(t testing.TB) []conformance.Delivered {
	msgs, err := c.e.rdb.XRange(context.Background(), c.e.stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	decode := redisstream.DecodeEvent(testConsumer)
	var out []conformance.Delivered
	for _, m := range msgs {
		im, err := decode(m)
		if err != nil {
			t.Fatal(fmt.Errorf("entry %v: %w", m.Values, err))
		}
		id, _ := m.Values[redisstream.DefaultIDField].(string)
		key, _ := m.Values[redisstream.FieldOrderingKey].(string)
		out = append(out, conformance.Delivered{ID: id, OrderingKey: key, Source: im.Source, EventType: im.EventType,
			SchemaVersion: im.SchemaVersion, Metadata: im.Metadata})
	}
	return out
}

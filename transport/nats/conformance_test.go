//go:build unix

package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/conformance"
	"github.com/pginbox/pginbox/transport/internal/drill"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

func TestConsumerConformance(t *testing.T) {
	t.Parallel()
	conformance.RunConsumer(t, driver{})
}

func TestPublisherConformance(t *testing.T) {
	t.Parallel()
	conformance.RunPublisher(t, driver{})
}

// headerMessageID carries the suite's message ID. It is not Nats-Msg-Id:
// the stream would drop the suite's redeliveries (same ID) as duplicates
// before any consumer saw them.
const headerMessageID = "Test-Message-Id"

// driver runs the conformance suites on JetStream.
type driver struct{}

func (driver) SharedAddr(t *testing.T) string { return hostPort(t, natsURL(t)) }

// PrivateBroker is a nats-server with JetStream file storage (the stream
// writes a message to its file before it acknowledges it).
func (driver) PrivateBroker(t *testing.T) conformance.Broker {
	return conformance.StartProcess(t, "nats-server", "INBOX_TEST_NATS_SERVER", "/usr/sbin/nats-server", func(port int, dir string) []string {
		return []string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", dir}
	})
}

func (driver) Skip(conformance.Case) string { return "" }

func (driver) Deduplicates() bool { return true } // Nats-Msg-Id is the event ID

func (driver) NewChannel(t *testing.T, addr string) conformance.Channel {
	return channel{newEnv(t, "nats://"+addr, true)}
}

func (driver) NewDestination(t testing.TB, addr string) conformance.Destination {
	return channel{newEnv(t, "nats://"+addr, false)}
}

func (driver) NewPublisher(t testing.TB, addr string) outbox.Publisher {
	return newPublisher(t, "nats://"+addr)
}

func hostPort(t testing.TB, url string) string {
	if len(url) < len("nats://") || url[:len("nats://")] != "nats://" {
		t.Fatalf("want a nats://host:port URL, got %q", url)
	}
	return url[len("nats://"):]
}

type channel struct{ e *env }

func (c channel) Send(t testing.TB, id, payload string) {
	t.Helper()
	m := &nats.Msg{Subject: c.e.subject, Header: nats.Header{}, Data: []byte(payload)}
	m.Header.Set(headerMessageID, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.e.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// decode is decodeOrder with the message ID from headerMessageID.
func decode(m jetstream.Msg) (inbox.Message, error) {
	if len(m.Data()) == 0 {
		return inbox.Message{}, errors.New("empty payload")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: conformance.Source, Consumer: conformance.Consumer, MessageID: m.Headers().Get(headerMessageID)},
		EventType:     conformance.EventType,
		SchemaVersion: conformance.SchemaVersion,
		Payload:       json.RawMessage(m.Data()),
	}, nil
}

func (c channel) Start(t testing.TB, s conformance.Setup) (func(), error) {
	cfg := c.e.config("nats://"+s.Addr, s.Log)
	cfg.Scope = s.Scope
	cfg.Decode = decode
	cfg.DeliveryLimit = s.DeliveryLimit
	if cfg.DeliveryLimit == 0 {
		cfg.DeliveryLimit = 1000 // outlasts any outage a case makes
	}
	consumer, err := pgnats.NewConsumer(s.Accepter, cfg)
	if err != nil {
		return nil, err
	}
	return drill.Run(t, consumer.Run), nil
}

func (c channel) Unsettled(t testing.TB) int { return c.e.unsettled(t) }

func (c channel) DeadLetters(t testing.TB) []conformance.DeadLetter {
	var out []conformance.DeadLetter
	for _, m := range c.e.deadLetters(t) {
		out = append(out, conformance.DeadLetter{
			MessageID: m.Header.Get(headerMessageID),
			Reason:    m.Header.Get(pgnats.HeaderReason),
			Payload:   string(m.Data),
			Receipt:   m.Header.Get(pgnats.HeaderReceipt),
		})
	}
	return out
}

func (c channel) Name() string { return c.e.subject }

func (c channel) Read(t testing.TB) []conformance.Delivered {
	dec := pgnats.DecodeEvent(testConsumer)
	var out []conformance.Delivered
	for _, m := range c.e.streamMsgs(t, 0) {
		im, err := dec(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, conformance.Delivered{ID: m.Headers().Get(jetstream.MsgIDHeader), OrderingKey: m.Headers().Get(pgnats.HeaderOrderingKey),
			Source: im.Source, EventType: im.EventType, SchemaVersion: im.SchemaVersion, Metadata: im.Metadata})
	}
	return out
}

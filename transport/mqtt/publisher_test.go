package mqtt_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/mqtt"
)

// newPublisher is a Publisher for url, closed at test end.
func newPublisher(t testing.TB, url string) *mqtt.Publisher {
	t.Helper()
	p, err := mqtt.NewPublisher(mqtt.PublisherConfig{ServerURL: url, Logger: testlog.Errors(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func outMessage(topic, body string) outbox.Message {
	return outbox.Message{ID: inboxtype.New(), Source: testSource, Destination: topic, EventType: drill.EventType,
		SchemaVersion: drill.SchemaVersion, Payload: []byte(body), Metadata: map[string]string{outbox.MetadataTraceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
}

// subscribe connects a clean client subscribed to topic at QoS 1.
func subscribe(t testing.TB, url, topic string) *collector {
	t.Helper()
	col := &collector{}
	c := connectRaw(t, url, &paho.Connect{ClientID: "pginbox-sub-" + randomID(), CleanStart: true, KeepAlive: 30}, col.add)
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	return col
}

// A topic no session subscribes to fails retryably (the broker answered
// "no matching subscribers" and dropped it); a topic name the broker would
// refuse goes DEAD at once. The batch's other messages are delivered.
// AllowNoSubscribers counts the dropped message as delivered.
func TestPublisherErrors(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	e := newEnv(t, url)
	got := subscribe(t, url, e.topic)
	p := newPublisher(t, url)
	errs := p.Publish(context.Background(), []outbox.Message{
		outMessage(e.topic, `{"n":1}`),
		outMessage(e.topic+"/nobody", `{"n":2}`),
		outMessage("pgi/+/orders", `{"n":3}`),
		outMessage("", `{"n":4}`),
	})
	if len(errs) != 4 || errs[0] != nil {
		t.Fatalf("errors %v: want the first delivered", errs)
	}
	if !errors.Is(errs[1], mqtt.ErrNoSubscribers) || handler.IsPermanent(errs[1]) {
		t.Errorf("no subscriber: %v, want a retryable ErrNoSubscribers", errs[1])
	}
	for _, err := range errs[2:] {
		if !errors.Is(err, mqtt.ErrRejected) || !handler.IsPermanent(err) {
			t.Errorf("bad topic: %v, want a permanent ErrRejected", err)
		}
	}
	drill.Eventually(t, 10*time.Second, "the delivered message", func() bool { return len(got.all()) == 1 })

	lax, err := mqtt.NewPublisher(mqtt.PublisherConfig{ServerURL: url, AllowNoSubscribers: true, Logger: testlog.Errors(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lax.Close() })
	if errs := lax.Publish(context.Background(), []outbox.Message{outMessage(e.topic+"/nobody", `{"n":5}`)}); errs != nil || lax.NoSubscribers() != 1 {
		t.Fatalf("AllowNoSubscribers: %v, %d dropped: want success, 1", errs, lax.NoSubscribers())
	}
}

// An mqtt Consumer in another service, decoding with DecodeEvent, accepts
// a published event under the event's ID, with its source, type, version
// and metadata; a re-publish (a relay crashed before marking) is a
// Duplicate.
func TestPublisherToConsumer(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	pool := newPool(t)
	e := newEnv(t, url)
	cfg := e.config(url, testlog.Errors(t))
	cfg.Decode = mqtt.DecodeEvent(testConsumer)
	c, err := mqtt.NewConsumer(newClient(t, pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	drill.Run(t, c.Run)
	p := newPublisher(t, url)
	m := outMessage(e.topic, `{"orderId":"o-1"}`)
	m.OrderingKey = "o-1"
	drill.Eventually(t, 30*time.Second, "the consumer subscribed", func() bool {
		return p.Publish(context.Background(), []outbox.Message{m}) == nil // ErrNoSubscribers until then
	})
	if errs := p.Publish(context.Background(), []outbox.Message{m}); errs != nil {
		t.Fatal(errs)
	}
	drill.Eventually(t, 30*time.Second, "the receipt", func() bool { return receipts(t, pool) == 1 })
	var id, source, eventType, trace string
	var version int
	err = pool.QueryRow(context.Background(), `SELECT message_id, source, event_type, schema_version, metadata->>$1 FROM pginbox_receipts_live`,
		outbox.MetadataTraceparent).Scan(&id, &source, &eventType, &version, &trace)
	if err != nil {
		t.Fatal(err)
	}
	if id != m.ID.String() || source != testSource || eventType != m.EventType || version != m.SchemaVersion || trace != m.Metadata[outbox.MetadataTraceparent] {
		t.Fatalf("receipt %s %s %s v%d trace %q: want the event's ID, source, type, version and traceparent", id, source, eventType, version, trace)
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return c.Stats().Acked >= 2 }, "the second copy, a Duplicate, acknowledged")
	if n := receipts(t, pool); n != 1 {
		t.Fatalf("%d receipts after a re-publish, want 1", n)
	}
}

// DecodeEvent refuses a message without the event ID.
func TestDecodeEventNeedsID(t *testing.T) {
	t.Parallel()
	_, err := mqtt.DecodeEvent(testConsumer)(&paho.Publish{Topic: "t", Payload: []byte(`{}`)})
	if err == nil || !strings.Contains(err.Error(), mqtt.DefaultIDProperty) {
		t.Fatalf("%v: want an error naming the %s user property", err, mqtt.DefaultIDProperty)
	}
}

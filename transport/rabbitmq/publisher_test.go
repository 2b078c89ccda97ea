package rabbitmq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

func TestPublisherConfigRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  rabbitmq.PublisherConfig
		want string
	}{
		{rabbitmq.PublisherConfig{}, "URL: is empty"},
		{rabbitmq.PublisherConfig{URL: "http://x"}, "PublisherConfig.URL"},
		{rabbitmq.PublisherConfig{URL: "amqp://127.0.0.1/", MaxMessageSize: -1}, "MaxMessageSize: is -1"},
	} {
		_, err := rabbitmq.NewPublisher(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPublisher(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// newPublisher is a publisher of the rig's broker at url, closed at test end.
func newPublisher(t testing.TB, url string, cfg rabbitmq.PublisherConfig) *rabbitmq.Publisher {
	t.Helper()
	cfg.URL = url
	if cfg.Logger == nil {
		cfg.Logger = testlog.Errors(t)
	}
	p, err := rabbitmq.NewPublisher(cfg)
	must(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// message is an outbox message to destination.
func message(destination string, body string) outbox.Message {
	return outbox.Message{
		ID: inboxtype.New(), Source: testSource, Destination: destination, EventType: drill.EventType,
		SchemaVersion: 1, Payload: []byte(body), EmittedAt: time.Now(), Attempt: 1,
	}
}

// A message no queue is bound for is returned (it is published mandatory):
// that message fails, retryable unless UnroutablePermanent; the others of
// the batch are delivered.
func TestPublisherUnroutable(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for _, permanent := range []bool{false, true} {
		p := newPublisher(t, r.url, rabbitmq.PublisherConfig{UnroutablePermanent: permanent})
		errs := p.Publish(context.Background(), []outbox.Message{
			message(r.queue, `{"n":1}`), message(r.queue+".nowhere", `{"n":2}`), message(r.queue, `{"n":3}`),
		})
		if len(errs) != 3 || errs[0] != nil || errs[2] != nil {
			t.Fatalf("permanent=%v: errors %v: want only the second to fail", permanent, errs)
		}
		if !errors.Is(errs[1], rabbitmq.ErrUnroutable) || handler.IsPermanent(errs[1]) != permanent ||
			!strings.Contains(errs[1].Error(), "bind a queue") {
			t.Fatalf("permanent=%v: unroutable error %v", permanent, errs[1])
		}
	}
	if d := r.depth(t, r.queue); d != 4 {
		t.Fatalf("queue holds %d messages, want the 4 routable ones", d)
	}
}

// A message the broker nacks (a full queue with overflow reject-publish)
// fails with ErrNacked, retryably.
func TestPublisherNacked(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	full := r.queue + ".full"
	ch, err := r.conn.Channel()
	must(t, err)
	_, err = ch.QueueDeclare(full, false, true, false, false, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	must(t, err)
	p := newPublisher(t, r.url, rabbitmq.PublisherConfig{AllowNotDurable: true}) // the full queue is transient
	errs := p.Publish(context.Background(), []outbox.Message{message(full, `{"n":1}`), message(full, `{"n":2}`)})
	if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], rabbitmq.ErrNacked) || handler.IsPermanent(errs[1]) {
		t.Fatalf("errors %v: want the second nacked, retryably", errs)
	}
}

// A body above MaxMessageSize goes DEAD at once; the batch's other messages
// are delivered.
func TestPublisherTooLarge(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	p := newPublisher(t, r.url, rabbitmq.PublisherConfig{MaxMessageSize: 16})
	errs := p.Publish(context.Background(), []outbox.Message{message(r.queue, `{"n":1}`), message(r.queue, `{"n":"0123456789abcdef"}`)})
	if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], rabbitmq.ErrTooLarge) || !handler.IsPermanent(errs[1]) {
		t.Fatalf("errors %v: want the second too large, permanently", errs)
	}
	if d := r.depth(t, r.queue); d != 1 {
		t.Fatalf("queue holds %d messages, want 1", d)
	}
}

// Publishing to an exchange that does not exist makes the broker close the
// channel: that message fails with the broker's reason, and the next
// Publish opens a new channel.
func TestPublisherChannelClosed(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	p := newPublisher(t, r.url, rabbitmq.PublisherConfig{Exchange: func(m outbox.Message) string {
		if strings.HasSuffix(m.Destination, ".missing") {
			return r.queue + ".no-such-exchange"
		}
		return ""
	}})
	errs := p.Publish(context.Background(), []outbox.Message{message(r.queue+".missing", `{"n":1}`)})
	if len(errs) != 1 || errs[0] == nil || handler.IsPermanent(errs[0]) || !strings.Contains(errs[0].Error(), "NOT_FOUND") {
		t.Fatalf("errors %v: want a retryable error carrying the broker's NOT_FOUND", errs)
	}
	if errs := p.Publish(context.Background(), []outbox.Message{message(r.queue, `{"n":2}`)}); errs != nil {
		t.Fatalf("publish after the channel closed: %v", errs)
	}
	if p.Connects() != 2 {
		t.Fatalf("%d connects, want 2 (a new one after the channel closed)", p.Connects())
	}
}

package rabbitmq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

// A transient queue loses what the broker confirmed when it restarts: the
// publisher refuses to publish to it by default, naming the setting, keeps
// publishing to the durable quorum queue beside it, and publishes to the
// transient one with the explicit opt-out.
func TestPublisherRefusesTransientQueue(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ch, err := r.conn.Channel()
	must(t, err)
	transient := r.queue + ".transient"
	_, err = ch.QueueDeclare(transient, false, false, false, false, nil)
	must(t, err)
	t.Cleanup(func() { _, _ = ch.QueueDelete(transient, false, false, false); _ = ch.Close() })

	p := newPublisher(t, r.url, rabbitmq.PublisherConfig{})
	errs := p.Publish(context.Background(), []outbox.Message{message(transient, `{"n":1}`), message(r.queue, `{"n":2}`)})
	if len(errs) != 2 || !errors.Is(errs[0], rabbitmq.ErrNotDurable) || !strings.Contains(errs[0].Error(), "durable") || !strings.Contains(errs[0].Error(), "AllowNotDurable") {
		t.Fatalf("publish to a transient queue: %v, want ErrNotDurable naming durable and the opt-out", errs)
	}
	if errs[1] != nil {
		t.Fatalf("publish to the quorum queue beside it: %v", errs[1])
	}
	if n := r.depth(t, transient); n != 0 {
		t.Fatalf("the transient queue got %d messages anyway", n)
	}

	optOut := newPublisher(t, r.url, rabbitmq.PublisherConfig{AllowNotDurable: true})
	if errs := optOut.Publish(context.Background(), []outbox.Message{message(transient, `{"n":3}`)}); errs != nil {
		t.Fatalf("publish with AllowNotDurable: %v", errs)
	}
}

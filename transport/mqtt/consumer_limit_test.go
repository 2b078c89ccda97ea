package mqtt_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/mqtt"
)

// poisoned fails every accept of message ID poison with a storage error and
// counts them.
type poisoned struct {
	mqtt.Accepter
	poison string
	tries  atomic.Int64
}

func (p *poisoned) Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error) {
	if msg.MessageID == p.poison {
		p.tries.Add(1)
		return inbox.AcceptResult{}, errors.New("storage failure")
	}
	return p.Accepter.Accept(ctx, msg)
}

// A message whose accept always fails is dead-lettered (reason
// delivery_limit) after DeliveryLimit failed accepts and acknowledged, and
// the message after it is accepted.
func TestDeliveryLimitDeadLettersPoison(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	pool := newPool(t)
	e := newEnv(t, url)
	dead := e.subscribeDead(t)
	acc := &poisoned{Accepter: newClient(t, pool), poison: "poison"}
	cfg := e.config(url, testlog.Errors(t))
	cfg.DeliveryLimit = 3
	c, err := mqtt.NewConsumer(acc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := drill.Run(t, c.Run)

	pub := e.publisher(t)
	publish(t, pub, e.topic, "poison", `{"orderId":"o-0"}`)
	publish(t, pub, e.topic, "after", `{"orderId":"o-1"}`)
	drill.Eventually(t, 30*time.Second, "the dead letter and the later message", func() bool {
		return len(dead.all()) == 1 && receipts(t, pool) == 1
	})
	u := dead.all()[0].Properties.User
	if u.Get("message-id") != "poison" || u.Get(mqtt.PropertyReason) != mqtt.ReasonDeliveryLimit ||
		!strings.Contains(u.Get(mqtt.PropertyError), "not accepted after 3 deliveries (DeliveryLimit); last error: storage failure") {
		t.Fatalf("dead letter %v, want poison with reason %s", u, mqtt.ReasonDeliveryLimit)
	}
	if n := acc.tries.Load(); n != 3 {
		t.Errorf("the poison message was tried %d times, want DeliveryLimit (3)", n)
	}
	drill.Eventually(t, 10*time.Second, "both settled", func() bool {
		s := c.Stats()
		return s.DeadLettered == 1 && s.Acked == 1
	})
	if s := c.Stats(); s.Retries != 2 {
		t.Errorf("stats %+v, want 2 retries", s)
	}
	stop()
	if n := e.leftovers(t); n != 0 {
		t.Fatalf("%d messages redelivered after a restart: not acknowledged", n)
	}
}

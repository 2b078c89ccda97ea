package rabbitmq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

// The changed-redelivery drill: the same message ID with different content,
// an invalid payload and an undecodable delivery each end in the dead-letter
// exchange with the reason in headers; the stored receipt does not change.
func TestRejectsGoToDeadLetterExchange(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	pool := drill.Pool(t, testDSN(t), nil)
	ledger := drill.NewLedger(t, pool, testConsumer)
	c, err := rabbitmq.NewConsumer(newClient(t, pool), r.config(t, r.url))
	must(t, err)
	run(t, c)

	r.publish(t, "evt-1", `{"total":"10.00"}`)
	drill.Eventually(t, 30*time.Second, "the original's ack", func() bool { return c.Stats().Acked == 1 })
	var before string
	must(t, pool.QueryRow(context.Background(), "SELECT to_jsonb(r)::text FROM pginbox_receipts_live r").Scan(&before))
	var id inbox.ID
	must(t, pool.QueryRow(context.Background(), "SELECT id FROM pginbox_receipts_live").Scan(&id))
	receipt := id.String()

	r.publish(t, "evt-1", `{"total":"99.00"}`) // changed redelivery
	r.publish(t, "evt-2", `{"a":1,"a":2}`)     // invalid: duplicate key
	r.publish(t, "", `{"n":3}`)                // no message ID: Decode fails
	drill.Eventually(t, 30*time.Second, "3 dead letters", func() bool { return c.Stats().DeadLettered == 3 })

	reasons := map[string]string{}
	for _, d := range r.dead(t) {
		reason, _ := d.Headers["x-pginbox-reason"].(string)
		errText, _ := d.Headers["x-pginbox-error"].(string)
		if d.Headers["x-pginbox-queue"] != r.queue || errText == "" {
			t.Errorf("dead letter %q without queue or error headers: %v", d.MessageId, d.Headers)
		}
		reasons[d.MessageId] = reason
		if reason == rabbitmq.ReasonConflict {
			if d.Headers["x-pginbox-receipt"] != receipt || !strings.Contains(errText, inbox.CodeIdentityConflict) || string(d.Body) != `{"total":"99.00"}` {
				t.Errorf("conflict dead letter: headers %v body %s; want receipt %s, %s, the changed body", d.Headers, d.Body, receipt, inbox.CodeIdentityConflict)
			}
		}
	}
	want := map[string]string{"evt-1": rabbitmq.ReasonConflict, "evt-2": rabbitmq.ReasonInvalid, "": rabbitmq.ReasonDecode}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("dead-letter reasons %v, want %v", reasons, want)
	}
	var after string
	must(t, pool.QueryRow(context.Background(), "SELECT to_jsonb(r)::text FROM pginbox_receipts_live r").Scan(&after))
	if after != before || ledger.Receipts(t) != 1 {
		t.Fatalf("the changed redelivery touched the receipt:\n%s\n%s", before, after)
	}
	if n := r.depth(t, r.queue); n != 0 {
		t.Fatalf("%d messages left in the queue", n)
	}
	ledger.Report(t, "rabbitmq changed-redelivery", []string{"evt-1"}, c.Stats().Acked)
}

// While Accept keeps asking to retry, a delivery is requeued until the
// quorum queue's delivery count reaches the limit, then dead-lettered.
func TestRetryIsBoundedByDeliveryLimit(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	proxy, pool := drill.ProxiedPool(t, testDSN(t))
	proxy.Refuse() // the database is down for the whole test
	cfg := r.config(t, r.url)
	cfg.DeliveryLimit = 3
	c, err := rabbitmq.NewConsumer(newClient(t, pool), cfg)
	must(t, err)
	run(t, c)
	r.publish(t, "evt-1", `{"n":1}`)
	drill.Eventually(t, 30*time.Second, "the dead letter", func() bool { return c.Stats().DeadLettered == 1 })
	dead := r.dead(t)
	if len(dead) != 1 || dead[0].Headers["x-pginbox-reason"] != rabbitmq.ReasonDeliveryLimit || dead[0].Headers["x-delivery-count"] != int64(2) {
		t.Fatalf("dead letters %v, want one with reason %s after 3 deliveries", dead, rabbitmq.ReasonDeliveryLimit)
	}
	if s := c.Stats(); s.Requeued != 2 || s.Acked != 0 {
		t.Fatalf("stats %+v, want 2 requeues and no ack", s)
	}
}

// A dead-letter exchange that routes nowhere would drop rejects silently, so
// the consumer keeps the delivery in the queue and says what to fix.
func TestUnroutableDeadLetterStaysInQueue(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ch, err := r.conn.Channel()
	must(t, err)
	must(t, ch.QueueUnbind(r.dlq, "", r.dlx, nil))
	must(t, ch.Close())
	pool := drill.Pool(t, testDSN(t), nil)
	var logs logBuffer
	cfg := r.config(t, r.url)
	cfg.Logger = logs.logger()
	c, err := rabbitmq.NewConsumer(newClient(t, pool), cfg)
	must(t, err)
	stop := run(t, c)
	r.publish(t, "evt-1", `{"a":1,"a":2}`)
	drill.Eventually(t, 30*time.Second, "two refused dead letters", func() bool { return c.Stats().Requeued >= 2 })
	stop()
	if !strings.Contains(logs.String(), "routed it nowhere") || !strings.Contains(logs.String(), "bind a queue to it") {
		t.Fatalf("the log does not say what to fix:\n%s", logs.String())
	}
	// The broker puts the last unacknowledged delivery back when the
	// consumer's channel closes, asynchronously: wait for it to count.
	drill.Eventually(t, 10*time.Second, "the message back in the queue", func() bool { return r.depth(t, r.queue) == 1 })
	if s := c.Stats(); s.DeadLettered != 0 {
		t.Fatalf("stats %+v: want the message still queued, not dead-lettered", s)
	}
}

func TestNewConsumerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	good := rabbitmq.Config{URL: "amqp://guest:guest@127.0.0.1:5672/", Queue: "q", Scope: inbox.Global(), Decode: decode, DeadLetterExchange: "dlx"}
	tests := []struct {
		name   string
		change func(*rabbitmq.Config)
		want   string
	}{
		{"no URL", func(c *rabbitmq.Config) { c.URL = "" }, "Config.URL: is empty"},
		{"bad URL", func(c *rabbitmq.Config) { c.URL = "http://127.0.0.1/" }, "Config.URL"},
		{"no queue", func(c *rabbitmq.Config) { c.Queue = "" }, "Config.Queue: is empty"},
		{"no scope", func(c *rabbitmq.Config) { c.Scope = inbox.Scope{} }, "Config.Scope: is unset"},
		{"no decode", func(c *rabbitmq.Config) { c.Decode = nil }, "Config.Decode: is nil"},
		{"no dead-letter exchange", func(c *rabbitmq.Config) { c.DeadLetterExchange = "" }, "Config.DeadLetterExchange: is empty"},
		{"prefetch below concurrency", func(c *rabbitmq.Config) { c.Concurrency, c.Prefetch = 4, 2 }, "Config.Prefetch: is 2"},
		{"negative delivery limit", func(c *rabbitmq.Config) { c.DeliveryLimit = -1 }, "Config.DeliveryLimit"},
		{"retry delay above max", func(c *rabbitmq.Config) { c.RetryDelay, c.MaxRetryDelay = time.Minute, time.Second }, "Config.RetryDelay"},
		{"negative accept timeout", func(c *rabbitmq.Config) { c.AcceptTimeout = -1 }, "Config.AcceptTimeout"},
	}
	for _, tc := range tests {
		cfg := good
		tc.change(&cfg)
		if _, err := rabbitmq.NewConsumer(&inbox.Client{}, cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := rabbitmq.NewConsumer(nil, good); err == nil {
		t.Error("NewConsumer accepted a nil accepter")
	}
}

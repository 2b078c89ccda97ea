package sqs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/drill"
	pgsqs "github.com/pginbox/pginbox/transport/sqs"
)

func TestNewConsumerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	c := client(t)
	cases := []struct {
		name   string
		change func(*pgsqs.Config)
		want   string
	}{
		{"client", func(c *pgsqs.Config) { c.Client = nil }, "sqs.Config.Client: is required"},
		{"queue", func(c *pgsqs.Config) { c.QueueURL = "" }, "sqs.Config.QueueURL: is required"},
		{"scope", func(c *pgsqs.Config) { c.Scope = inbox.Scope{} }, "sqs.Config.Scope: is unset"},
		{"decode", func(c *pgsqs.Config) { c.Decode = nil }, "sqs.Config.Decode: is required"},
		{"dlq", func(c *pgsqs.Config) { c.DeadLetterQueueURL = c.QueueURL }, "sqs.Config.DeadLetterQueueURL: is the consumed queue"},
		{"visibility", func(c *pgsqs.Config) { c.VisibilityTimeout = 1500 * time.Millisecond }, "sqs.Config.VisibilityTimeout: is 1.5s"},
		{"wait", func(c *pgsqs.Config) { c.WaitTime = 30 * time.Second }, "sqs.Config.WaitTime: is 30s"},
		{"retry delay", func(c *pgsqs.Config) { c.RetryDelay = -time.Second }, "sqs.Config.RetryDelay: is -1s"},
		{"max retry delay", func(c *pgsqs.Config) { c.RetryDelay, c.MaxRetryDelay = time.Minute, time.Second }, "sqs.Config.MaxRetryDelay: is 1s: it must be from RetryDelay (1m0s)"},
		{"concurrency", func(c *pgsqs.Config) { c.Concurrency = -1 }, "sqs.Config.Concurrency: is -1"},
		{"accept timeout", func(c *pgsqs.Config) { c.AcceptTimeout = -time.Second }, "sqs.Config.AcceptTimeout: is -1s"},
	}
	for _, tc := range cases {
		cfg := config(c, "http://q/1/orders", "", t)
		tc.change(&cfg)
		_, err := pgsqs.NewConsumer(&watched{}, cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want an inbox.ErrInvalidConfig containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := pgsqs.NewConsumer(nil, config(c, "http://q/1/orders", "", t)); err == nil || !strings.Contains(err.Error(), "pass an *inbox.Client") {
		t.Errorf("nil accepter: err = %v", err)
	}
}

func TestRunFailsOnMissingQueue(t *testing.T) {
	t.Parallel()
	c := client(t)
	url := server().URL + "/000000000000/missing-" + randomID()
	cons, err := pgsqs.NewConsumer(&watched{}, config(c, url, "", t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cons.Run(ctx); !errors.Is(err, pgsqs.ErrQueueNotFound) || !strings.Contains(err.Error(), "fix Config.QueueURL") {
		t.Fatalf("Run = %v, want ErrQueueNotFound", err)
	}
}

// Every accept happens while the message is still in the queue; accepted
// and duplicate deliveries are then deleted, and the receipt exists once.
func TestAcceptThenDelete(t *testing.T) {
	t.Parallel()
	c := client(t)
	pool := newPool(t)
	url := createQueue(t, c, "orders-"+randomID(), nil)
	w := &watched{acc: newClient(t, pool)}
	w.check = func(when string) {
		if held(t, c, url) == 0 {
			t.Errorf("%s: the queue no longer holds the message", when)
		}
	}
	start(t, w, config(c, url, "", t))

	send(t, c, url, "evt-1", `{"orderId":"o-1"}`)
	send(t, c, url, "evt-2", `{"orderId":"o-2"}`)
	drill.Eventually(t, 20*time.Second, "two messages deleted", func() bool { return held(t, c, url) == 0 })
	send(t, c, url, "evt-1", `{"orderId":"o-1"}`) // a redelivery by the producer
	drill.Eventually(t, 20*time.Second, "the duplicate deleted", func() bool { return w.calls.Load() == 3 && held(t, c, url) == 0 })

	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts_live WHERE scope_id = $1`, testTenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 || w.failures.Load() != 0 {
		t.Fatalf("%d receipts of %s and %d failed accepts, want 2 and 0", n, testTenant, w.failures.Load())
	}
}

// Messages that can never be accepted go to the dead-letter queue with
// their reason, and are deleted; nothing reaches the inbox.
func TestRejectToDeadLetterQueue(t *testing.T) {
	t.Parallel()
	c := client(t)
	pool := newPool(t)
	url := createQueue(t, c, "orders-"+randomID(), nil)
	dlq := createQueue(t, c, "orders-dead-"+randomID(), nil)
	start(t, newClient(t, pool), config(c, url, dlq, t))

	send(t, c, url, "bad-json", `{"orderId":`)
	send(t, c, url, "", `{"orderId":"o-1"}`) // no message ID
	drill.Eventually(t, 20*time.Second, "two dead letters", func() bool { return held(t, c, dlq) == 2 })
	drill.Eventually(t, 10*time.Second, "the rejected messages deleted", func() bool { return held(t, c, url) == 0 })

	want := map[string]struct{ reason, err string }{ // by body
		`{"orderId":`:       {pgsqs.ReasonInvalid, "invalid_json"},
		`{"orderId":"o-1"}`: {pgsqs.ReasonDecode, "send a pginbox.message_id message attribute"},
	}
	for _, m := range drain(t, c, dlq) {
		w, ok := want[aws.ToString(m.Body)]
		reason := aws.ToString(m.MessageAttributes[pgsqs.AttrReason].StringValue)
		msg := aws.ToString(m.MessageAttributes[pgsqs.AttrError].StringValue)
		origin := aws.ToString(m.MessageAttributes[pgsqs.AttrOrigin].StringValue)
		if !ok || reason != w.reason || !strings.Contains(msg, w.err) || !strings.Contains(origin, url) || !strings.Contains(origin, `"receives":1`) {
			t.Errorf("dead letter %q: reason %q error %q origin %s, want %q with %q", aws.ToString(m.Body), reason, msg, origin, w.reason, w.err)
		}
	}
	if n := receipts(t, pool); n != 0 {
		t.Fatalf("%d receipts, want none", n)
	}
}

// Without Config.DeadLetterQueueURL a rejected message is left to the
// queue's redrive policy, which moves it to its dead-letter queue.
func TestRejectByRedrivePolicy(t *testing.T) {
	t.Parallel()
	c := client(t)
	dlq := createQueue(t, c, "orders-redrive-"+randomID(), nil)
	url := createQueue(t, c, "orders-"+randomID(), redrive(t, queueARN(t, c, dlq), 2))
	w := &watched{acc: newClient(t, newPool(t))}
	start(t, w, config(c, url, "", t))

	send(t, c, url, "bad-json", `{"orderId":`)
	drill.Eventually(t, 30*time.Second, "the message in the redrive queue", func() bool { return held(t, c, dlq) == 1 })
	if held(t, c, url) != 0 || w.calls.Load() != 2 {
		t.Fatalf("queue holds %d, %d accepts; want 0 and 2 (maxReceiveCount)", held(t, c, url), w.calls.Load())
	}
}

// While the database is down nothing is deleted: the message is received
// again after the retry delay, and accepted once the database is back.
func TestDatabaseDownRedelivers(t *testing.T) {
	t.Parallel()
	c := client(t)
	proxy, pool := drill.ProxiedPool(t, testDSN(t))
	url := createQueue(t, c, "orders-"+randomID(), nil)
	w := &watched{acc: newClient(t, pool)}
	start(t, w, config(c, url, "", t))

	proxy.Cut()
	proxy.Refuse()
	send(t, c, url, "evt-1", `{"orderId":"o-1"}`)
	drill.Eventually(t, 60*time.Second, "two failed accepts", func() bool { return w.failures.Load() >= 2 })
	if held(t, c, url) != 1 {
		t.Fatal("a message whose accept failed was deleted")
	}
	proxy.Resume()
	drill.Eventually(t, 60*time.Second, "the message accepted and deleted", func() bool { return held(t, c, url) == 0 })
	if n := receipts(t, pool); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
}

// slow delays every accept.
// slow accepts once release is closed.
type slow struct {
	acc     pgsqs.Accepter
	release chan struct{}
}

func (s slow) Accept(ctx context.Context, m inbox.Message) (inbox.AcceptResult, error) {
	<-s.release
	return s.acc.Accept(ctx, m)
}

// An accept slower than the visibility timeout keeps the message hidden
// (the Consumer extends the timeout): no second receiver gets it, and it
// is accepted once.
func TestSlowAcceptExtendsVisibility(t *testing.T) {
	t.Parallel()
	c := client(t)
	pool := newPool(t)
	url := createQueue(t, c, "orders-"+randomID(), nil)
	release := make(chan struct{})
	w := &watched{acc: slow{acc: newClient(t, pool), release: release}}
	cfg := config(c, url, "", t)
	cfg.VisibilityTimeout = 2 * time.Second
	start(t, w, cfg)

	send(t, c, url, "evt-1", `{"orderId":"o-1"}`)
	drill.Eventually(t, 20*time.Second, "the accept started", func() bool { return w.calls.Load() == 1 })
	// Another receiver polls through the accept, well past the 2s timeout.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) > 0 || w.calls.Load() > 1 {
			t.Fatalf("the message was received again while being accepted (%d accepts, %d by another receiver)", w.calls.Load(), len(out.Messages))
		}
	}
	close(release) // the accept, still running all along, ends
	drill.Eventually(t, 30*time.Second, "the message deleted", func() bool { return held(t, c, url) == 0 })
	if w.calls.Load() != 1 || receipts(t, pool) != 1 {
		t.Fatalf("%d accepts, %d receipts; want 1 and 1", w.calls.Load(), receipts(t, pool))
	}
}

// Close ends Run; a closed consumer takes nothing.
func TestCloseStops(t *testing.T) {
	t.Parallel()
	c := client(t)
	pool := newPool(t)
	url := createQueue(t, c, "orders-"+randomID(), nil)
	cons, err := pgsqs.NewConsumer(newClient(t, pool), config(c, url, "", t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cons.Run(context.Background()) }()
	send(t, c, url, "evt-1", `{"orderId":"o-1"}`)
	drill.Eventually(t, 20*time.Second, "the message deleted", func() bool { return held(t, c, url) == 0 })
	if err := cons.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after Close, want nil", err)
	}
	send(t, c, url, "evt-2", `{"orderId":"o-2"}`)
	// Nothing runs that could take it, so no event can say it was not
	// taken: watch for a while.
	testkit.Never(t, 300*time.Millisecond, func() bool { return held(t, c, url) != 1 || receipts(t, pool) != 1 },
		"a closed consumer took a message")
}

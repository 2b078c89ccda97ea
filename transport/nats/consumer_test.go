package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

func TestNewConsumerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	client := newClient(t, newPool(t))
	e := &env{stream: "S", durable: "D", dead: "dead"}
	cases := []struct {
		name   string
		change func(*pgnats.Config)
		want   string
	}{
		{"url", func(c *pgnats.Config) { c.URL = "" }, "Config.URL: is required"},
		{"scope", func(c *pgnats.Config) { c.Scope = inbox.Scope{} }, "Config.Scope: is unset"},
		{"stream", func(c *pgnats.Config) { c.Stream = "" }, "Config.Stream: is required"},
		{"durable", func(c *pgnats.Config) { c.Durable = "" }, "Config.Durable: is required"},
		{"decode", func(c *pgnats.Config) { c.Decode = nil }, "Config.Decode: is required"},
		{"dead letter", func(c *pgnats.Config) { c.DeadLetterSubject = "" }, "Config.DeadLetterSubject: is required"},
		{"delivery limit", func(c *pgnats.Config) { c.DeliveryLimit = 1 }, "Config.DeliveryLimit: is 1"},
		{"ack wait", func(c *pgnats.Config) { c.AckWait = time.Millisecond }, "Config.AckWait: is 1ms"},
		{"retry delay", func(c *pgnats.Config) { c.RetryDelay = -time.Second }, "Config.RetryDelay: is -1s"},
		{"max retry delay", func(c *pgnats.Config) { c.RetryDelay, c.MaxRetryDelay = time.Minute, time.Second }, "Config.MaxRetryDelay: (1s) is below RetryDelay (1m0s)"},
		{"concurrency", func(c *pgnats.Config) { c.Concurrency = -1 }, "Config.Concurrency: is -1"},
	}
	for _, tc := range cases {
		cfg := e.config("nats://127.0.0.1:4222", nil)
		tc.change(&cfg)
		_, err := pgnats.NewConsumer(client, cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := pgnats.NewConsumer(nil, e.config("nats://127.0.0.1:4222", nil)); err == nil || !strings.Contains(err.Error(), "pass an *inbox.Client") {
		t.Errorf("nil accepter: err = %v", err)
	}
}

func TestRunFailsFast(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	client := newClient(t, newPool(t))
	cases := []struct {
		name string
		cfg  func(*pgnats.Config)
		want func(error) bool
		hint string
	}{
		{"missing stream", func(c *pgnats.Config) { c.Stream = "PGI_MISSING_" + randomID() },
			func(err error) bool { return errors.Is(err, pgnats.ErrStreamNotFound) }, "fix Config.Stream"},
		{"bad URL", func(c *pgnats.Config) { c.URL = "nats://%zz" }, func(err error) bool { return err != nil }, "connecting to nats://%zz"},
	}
	for _, tc := range cases {
		e := &env{stream: "S", durable: "d", dead: "dead"}
		cfg := e.config(url, testlog.Errors(t))
		tc.cfg(&cfg)
		c, err := pgnats.NewConsumer(client, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = c.Run(ctx)
		cancel()
		if !tc.want(err) || !strings.Contains(err.Error(), tc.hint) {
			t.Errorf("%s: Run = %v, want an error with %q", tc.name, err, tc.hint)
		}
	}
}

// Messages that can never be accepted are stored under the dead-letter
// subject with their reason and terminated; nothing reaches the inbox.
func TestRejectToDeadLetter(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	pool := newPool(t)
	e := newEnv(t, url, true)
	start(t, newClient(t, pool), e.config(url, testlog.Errors(t)))

	e.publish(t, "bad-json", `{"orderId":`)
	e.publish(t, "empty", ``)
	e.publish(t, "", `{"orderId":"o-1"}`) // no message ID
	drill.Eventually(t, 20*time.Second, "three dead letters", func() bool { return len(e.deadLetters(t)) == 3 })

	want := map[string]struct{ reason, err string }{ // by stream sequence
		"1": {pgnats.ReasonInvalid, "invalid_json"},
		"2": {pgnats.ReasonDecode, "empty payload"},
		"3": {pgnats.ReasonDecode, "publish with a Nats-Msg-Id header"},
	}
	for _, dl := range e.deadLetters(t) {
		seq := dl.Header.Get(pgnats.HeaderSequence)
		w := want[seq]
		if dl.Header.Get(pgnats.HeaderReason) != w.reason || !strings.Contains(dl.Header.Get(pgnats.HeaderError), w.err) {
			t.Errorf("dead letter of seq %s: reason %q error %q, want %q with %q", seq,
				dl.Header.Get(pgnats.HeaderReason), dl.Header.Get(pgnats.HeaderError), w.reason, w.err)
		}
		if dl.Header.Get(pgnats.HeaderStream) != e.stream || dl.Header.Get(pgnats.HeaderSubject) != e.subject || dl.Header.Get(pgnats.HeaderDeliveries) != "1" {
			t.Errorf("dead letter of seq %s: origin headers %v", seq, dl.Header)
		}
	}
	drill.Eventually(t, 10*time.Second, "rejected messages terminated", func() bool { return e.unsettled(t) == 0 })
	if n := receipts(t, pool); n != 0 {
		t.Fatalf("%d receipts, want none", n)
	}
}

// Without a stream capturing the dead-letter subject, a rejected message is
// not terminated: it is redelivered (and the log says what to fix) until the
// subject is captured, then it is dead-lettered.
func TestRejectWaitsForDeadLetterStream(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	e := newEnv(t, url, false)
	log, logs := testlog.Capture()
	start(t, newClient(t, newPool(t)), e.config(url, log))

	e.publish(t, "bad-json", `{"orderId":`)
	drill.Eventually(t, 20*time.Second, "a redelivery", func() bool { return e.consumerInfo(t).NumRedelivered > 0 })
	if !strings.Contains(logs.String(), "make sure a stream captures that subject") {
		t.Fatalf("log does not say what to fix:\n%s", logs)
	}
	if e.unsettled(t) != 1 {
		t.Fatal("the message was settled without a dead letter")
	}
	e.captureDead(t)
	drill.Eventually(t, 20*time.Second, "the dead letter", func() bool { return len(e.deadLetters(t)) == 1 })
	drill.Eventually(t, 10*time.Second, "the message terminated", func() bool { return e.unsettled(t) == 0 })
}

package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	nc := connect(t, url)
	pool := newPool(t, testDSN(t))
	client := newClient(t, pool)
	e := &env{stream: "S", durable: "D", dead: "dead"}
	cases := []struct {
		name   string
		change func(*pgnats.Config)
		want   string
	}{
		{"stream", func(c *pgnats.Config) { c.Stream = "" }, "Config.Stream is required"},
		{"durable", func(c *pgnats.Config) { c.Durable = "" }, "Config.Durable is required"},
		{"decode", func(c *pgnats.Config) { c.Decode = nil }, "Config.Decode is required"},
		{"dead letter", func(c *pgnats.Config) { c.DeadLetterSubject = "" }, "Config.DeadLetterSubject is required"},
		{"max deliver", func(c *pgnats.Config) { c.MaxDeliver = 1 }, "Config.MaxDeliver is 1"},
		{"ack wait", func(c *pgnats.Config) { c.AckWait = time.Millisecond }, "Config.AckWait is 1ms"},
		{"retry delay", func(c *pgnats.Config) { c.RetryDelay = -time.Second }, "Config.RetryDelay is -1s"},
		{"max retry delay", func(c *pgnats.Config) { c.RetryDelay, c.MaxRetryDelay = time.Minute, time.Second }, "Config.MaxRetryDelay (1s) is below RetryDelay (1m0s)"},
		{"concurrency", func(c *pgnats.Config) { c.Concurrency = -1 }, "Config.Concurrency is -1"},
	}
	for _, tc := range cases {
		cfg := e.config(nil)
		tc.change(&cfg)
		_, err := pgnats.New(nc, client, cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := pgnats.New(nil, client, e.config(nil)); err == nil || !strings.Contains(err.Error(), "connection is nil") {
		t.Errorf("nil conn: err = %v", err)
	}
	if _, err := pgnats.New(nc, nil, e.config(nil)); err == nil || !strings.Contains(err.Error(), "client is nil") {
		t.Errorf("nil client: err = %v", err)
	}
	finite, err := nats.Connect(url) // default: gives up after 60 reconnects
	if err != nil {
		t.Fatal(err)
	}
	defer finite.Close()
	if _, err := pgnats.New(finite, client, e.config(nil)); err == nil || !strings.Contains(err.Error(), "nats.MaxReconnects(-1)") {
		t.Errorf("finite reconnects: err = %v", err)
	}
}

func TestRunMissingStream(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	pool := newPool(t, testDSN(t))
	e := &env{stream: "PGI_MISSING_" + randomID(), durable: "d", dead: "dead"}
	c := newConsumer(t, connect(t, url), newClient(t, pool), e.config(quietLogger(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Run(ctx)
	if !errors.Is(err, pgnats.ErrStreamNotFound) || !strings.Contains(err.Error(), "fix Config.Stream") {
		t.Fatalf("Run = %v, want ErrStreamNotFound with a hint", err)
	}
}

// Accepted and duplicate deliveries are acked; the receipt exists once.
func TestAcceptThenAck(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, url, true)
	cfg := e.config(quietLogger(t))
	cfg.Decode = decodeByEventID // the same event published twice with different Nats-Msg-Ids
	run(t, newConsumer(t, connect(t, url), newClient(t, pool), cfg))

	e.publish(t, "pub-1", `{"eventId":"evt-1","orderId":"o-1"}`)
	e.publish(t, "pub-2", `{"eventId":"evt-2","orderId":"o-2"}`)
	e.publish(t, "pub-3", `{"orderId":"o-1","eventId":"evt-1"}`) // redelivery by the producer, keys reordered
	eventually(t, 20*time.Second, "all messages acked", func() bool { return e.unsettled(t) == 0 })

	var receipts int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts`).Scan(&receipts); err != nil {
		t.Fatal(err)
	}
	if receipts != 2 {
		t.Fatalf("%d receipts, want 2", receipts)
	}
	if info := e.consumerInfo(t); info.AckFloor.Stream != 3 {
		t.Fatalf("ack floor %d, want 3", info.AckFloor.Stream)
	}
	if dl := e.deadLetters(t); len(dl) != 0 {
		t.Fatalf("%d dead letters, want none", len(dl))
	}
}

// Messages that can never be accepted are stored under the dead-letter
// subject with their reason and terminated; nothing reaches the inbox.
func TestRejectToDeadLetter(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, url, true)
	run(t, newConsumer(t, connect(t, url), newClient(t, pool), e.config(quietLogger(t))))

	e.publish(t, "bad-json", `{"orderId":`)
	e.publish(t, "empty", ``)
	e.publish(t, "", `{"orderId":"o-1"}`) // no message ID
	eventually(t, 20*time.Second, "three dead letters", func() bool { return len(e.deadLetters(t)) == 3 })

	want := map[string]struct{ code, reason string }{ // by stream sequence
		"1": {pgnats.CodeInvalid, "invalid_json"},
		"2": {pgnats.CodeDecode, "empty payload"},
		"3": {pgnats.CodeDecode, "publish with a Nats-Msg-Id header"},
	}
	for _, dl := range e.deadLetters(t) {
		seq := dl.Header.Get(pgnats.HeaderSequence)
		w := want[seq]
		if dl.Header.Get(pgnats.HeaderCode) != w.code || !strings.Contains(dl.Header.Get(pgnats.HeaderReason), w.reason) {
			t.Errorf("dead letter of seq %s: code %q reason %q, want %q containing %q", seq,
				dl.Header.Get(pgnats.HeaderCode), dl.Header.Get(pgnats.HeaderReason), w.code, w.reason)
		}
		if dl.Header.Get(pgnats.HeaderStream) != e.stream || dl.Header.Get(pgnats.HeaderSubject) != e.subject {
			t.Errorf("dead letter of seq %s: origin headers %v", seq, dl.Header)
		}
	}
	eventually(t, 10*time.Second, "rejected messages terminated", func() bool { return e.unsettled(t) == 0 })
	var receipts int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts`).Scan(&receipts); err != nil {
		t.Fatal(err)
	}
	if receipts != 0 {
		t.Fatalf("%d receipts, want none", receipts)
	}
}

// Without a stream capturing the dead-letter subject, a rejected message is
// not terminated: it is redelivered (and the log says what to fix) until the
// subject is captured, then it is dead-lettered.
func TestRejectWaitsForDeadLetterStream(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, url, false)
	log, logs := capture()
	run(t, newConsumer(t, connect(t, url), newClient(t, pool), e.config(log)))

	e.publish(t, "bad-json", `{"orderId":`)
	eventually(t, 20*time.Second, "a redelivery", func() bool { return e.consumerInfo(t).NumRedelivered > 0 })
	if !strings.Contains(logs.String(), "make sure a stream captures that subject") {
		t.Fatalf("log does not say what to fix:\n%s", logs)
	}
	if e.unsettled(t) != 1 {
		t.Fatal("the message was settled without a dead letter")
	}
	e.captureDead(t)
	eventually(t, 20*time.Second, "the dead letter", func() bool { return len(e.deadLetters(t)) == 1 })
	eventually(t, 10*time.Second, "the message terminated", func() bool { return e.unsettled(t) == 0 })
}

// Shutdown: Run returns nil after cancel and the messages it took are settled
// or left to redelivery, never acked unaccepted.
func TestRunStops(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, url, true)
	stop := run(t, newConsumer(t, connect(t, url), newClient(t, pool), e.config(quietLogger(t))))
	e.publish(t, "m-1", `{"orderId":"o-1"}`)
	eventually(t, 20*time.Second, "the message acked", func() bool { return e.unsettled(t) == 0 })
	stop() // fails the test if Run returned an error or hung

	e.publish(t, "m-2", `{"orderId":"o-2"}`)
	time.Sleep(300 * time.Millisecond)
	if e.unsettled(t) != 1 {
		t.Fatal("a stopped consumer settled a message")
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts WHERE message_id = 'm-2'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("stopped consumer accepted m-2 (n=%d, err=%v)", n, err)
	}
}

package sqs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	pgsqs "github.com/pginbox/pginbox/transport/sqs"
)

func TestPublisherConfigRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  pgsqs.PublisherConfig
		want string
	}{
		{pgsqs.PublisherConfig{}, "sqs.PublisherConfig.Client: is required"},
		{pgsqs.PublisherConfig{Client: client(t), MaxMessageBytes: -1}, "sqs.PublisherConfig.MaxMessageBytes: is -1"},
	} {
		if _, err := pgsqs.NewPublisher(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("NewPublisher: %v, want an inbox.ErrInvalidConfig containing %q", err, tc.want)
		}
	}
}

func newPublisher(t testing.TB, cfg pgsqs.PublisherConfig) *pgsqs.Publisher {
	t.Helper()
	p, err := pgsqs.NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// checked records what an accepter got and fails the test on a message
// whose attributes did not come through.
type checked struct {
	t   testing.TB
	acc pgsqs.Accepter
	got *relaytest.Received
}

func (c checked) Accept(ctx context.Context, m inbox.Message) (inbox.AcceptResult, error) {
	if m.Source != relaytest.Source || m.EventType != relaytest.EventType || m.SchemaVersion != relaytest.Version ||
		m.Metadata[relaytest.MetadataKey] != relaytest.MetadataVal {
		c.t.Errorf("message %s decoded as %+v", m.MessageID, m)
	}
	c.got.Add(m.MessageID)
	return c.acc.Accept(ctx, m)
}

// The relay publishes through the Publisher to a FIFO queue; events the
// relay sends again (as after a crash between send and mark) are dropped by
// the queue, whose deduplication ID is the event ID; a Consumer with
// DecodeEvent accepts every event once, in order per ordering key.
func TestRelayToFIFOQueue(t *testing.T) {
	t.Parallel()
	c := client(t)
	url := createQueue(t, c, "relay-"+randomID()+".fifo", nil)
	pool := relaytest.Pool(t, testDSN(t))
	pub := newPublisher(t, pgsqs.PublisherConfig{Client: c})
	ev := relaytest.Emit(t, pool, url, 40)
	stopRelay := drill.Run(t, relaytest.Relay(t, pool, pub, testlog.Errors(t)).Run)
	drill.Eventually(t, 60*time.Second, "every event marked PUBLISHED", func() bool { return relaytest.Published(t, pool) == len(ev.IDs) })
	stopRelay()

	// Send the first ten again, as a relay that lost its marks would.
	var again []outbox.Message
	for i, id := range ev.IDs[:10] {
		pid, err := inboxtype.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		var payload string
		if err := pool.QueryRow(context.Background(), `SELECT payload::text FROM pginbox_outbox WHERE id = $1`, pid).Scan(&payload); err != nil {
			t.Fatal(err)
		}
		e := relaytest.Event(url, i)
		again = append(again, outbox.Message{ID: pid, Source: e.Source, Destination: url, OrderingKey: e.OrderingKey,
			EventType: e.Type, SchemaVersion: e.SchemaVersion, Payload: []byte(payload), Metadata: e.Metadata})
	}
	if errs := pub.Publish(context.Background(), again); errs != nil {
		t.Fatalf("publishing again: %v", errs)
	}
	if n := held(t, c, url); n != len(ev.IDs) {
		t.Fatalf("the queue holds %d messages, want %d: the resends were not deduplicated", n, len(ev.IDs))
	}

	var got relaytest.Received
	inboxPool := newPool(t)
	cfg := config(c, url, "", t)
	cfg.Decode = pgsqs.DecodeEvent("orders.projection.v1")
	cfg.Concurrency = 1 // arrival order is accept order
	start(t, checked{t: t, acc: newClient(t, inboxPool), got: &got}, cfg)
	drill.Eventually(t, 60*time.Second, "every event accepted and deleted", func() bool {
		return got.Distinct() == len(ev.IDs) && held(t, c, url) == 0
	})
	got.Report(t, "sqs fifo relay", ev, relaytest.Published(t, pool), false)
	if n := receipts(t, inboxPool); n != len(ev.IDs) {
		t.Fatalf("%d receipts, want %d", n, len(ev.IDs))
	}
}

// A message over MaxMessageBytes fails for good; a missing queue is
// retried.
func TestPublishErrors(t *testing.T) {
	t.Parallel()
	c := client(t)
	url := createQueue(t, c, "small-"+randomID(), nil)
	pub := newPublisher(t, pgsqs.PublisherConfig{Client: c, MaxMessageBytes: 200})
	msg := func(dest string, size int) outbox.Message {
		return outbox.Message{ID: inboxtype.New(), Source: "orders", Destination: dest, EventType: "order.created",
			SchemaVersion: 1, Payload: []byte(`"` + strings.Repeat("x", size) + `"`)}
	}
	errs := pub.Publish(context.Background(), []outbox.Message{
		msg(url, 10), msg(url, 300), msg(server().URL+"/000000000000/missing-"+randomID(), 10),
	})
	if len(errs) != 3 || errs[0] != nil {
		t.Fatalf("errors %v, want the first message sent", errs)
	}
	if !handler.IsPermanent(errs[1]) || !errors.Is(errs[1], pgsqs.ErrPublishRejected) {
		t.Errorf("oversized message: %v, want a permanent ErrPublishRejected", errs[1])
	}
	if handler.IsPermanent(errs[2]) || !strings.Contains(errs[2].Error(), "does not exist") {
		t.Errorf("missing queue: %v, want a retryable error saying the queue does not exist", errs[2])
	}
	if n := held(t, c, url); n != 1 {
		t.Fatalf("the queue holds %d messages, want 1", n)
	}
}

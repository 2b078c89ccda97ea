package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

func TestPublisherConfigRejected(t *testing.T) {
	t.Parallel()
	if _, err := pgnats.NewPublisher(pgnats.PublisherConfig{}); err == nil || !strings.Contains(err.Error(), "URL: is empty") {
		t.Fatalf("NewPublisher with no URL: %v, want an error naming the URL", err)
	}
}

func newPublisher(t testing.TB, url string) *pgnats.Publisher {
	t.Helper()
	p, err := pgnats.NewPublisher(pgnats.PublisherConfig{URL: url, ConnectOptions: []nats.Option{
		nats.ReconnectWait(50 * time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}), // drills cause them on purpose
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func outMessage(subject, body string) outbox.Message {
	return outbox.Message{ID: inboxtype.New(), Source: testSource, Destination: subject, EventType: "order.confirmed", SchemaVersion: 1, Payload: []byte(body)}
}

// streamMsgs reads every message of the env's stream, waiting up to 30s
// for at least n.
func (e *env) streamMsgs(t testing.TB, n int) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	c, err := e.js.OrderedConsumer(ctx, e.stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	testkit.Eventually(t, 30*time.Second, func() bool {
		batch, err := c.FetchNoWait(1000)
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			out = append(out, m)
		}
		info, err := e.js.Stream(ctx, e.stream)
		if err != nil {
			t.Fatal(err)
		}
		return len(out) >= n && uint64(len(out)) >= info.CachedInfo().State.Msgs
	}, "%d messages read; read %v", n, testkit.Lazy(func() string { return fmt.Sprint(len(out)) }))
	return out
}

// streamLen is the number of messages the stream holds.
func (e *env) streamLen(t testing.TB) uint64 {
	t.Helper()
	s, err := e.js.Stream(context.Background(), e.stream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

// A re-publish of an event is acknowledged as a duplicate, which is
// success, and the stream keeps one copy.
func TestPublisherDuplicateIsSuccess(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	e := newEnv(t, url, false)
	p := newPublisher(t, url)
	m := outMessage(e.subject, `{"n":1}`)
	for range 2 {
		if errs := p.Publish(context.Background(), []outbox.Message{m}); errs != nil {
			t.Fatalf("publish: %v", errs)
		}
	}
	if p.Duplicates() != 1 || e.streamLen(t) != 1 {
		t.Fatalf("%d duplicates, %d stream messages: want 1 and 1", p.Duplicates(), e.streamLen(t))
	}
}

// A subject no stream captures fails retryably (the stream may be created);
// a message above the stream's max_msg_size fails permanently. The batch's
// other messages are stored.
func TestPublisherErrors(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	e := newEnv(t, url, false)
	_, err := e.js.UpdateStream(context.Background(), jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.subject}, Storage: jetstream.FileStorage, MaxMsgSize: 512}) // headers count too
	if err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, url)
	errs := p.Publish(context.Background(), []outbox.Message{
		outMessage(e.subject, `{"n":1}`),
		outMessage(e.subject+".nowhere", `{"n":2}`),
		outMessage(e.subject, `"`+strings.Repeat("x", 1024)+`"`),
	})
	if len(errs) != 3 || errs[0] != nil {
		t.Fatalf("errors %v: want the first stored", errs)
	}
	if handler.IsPermanent(errs[1]) || !strings.Contains(errs[1].Error(), "no stream captures the subject") {
		t.Errorf("uncaptured subject: %v, want a retryable error naming the missing stream", errs[1])
	}
	if !errors.Is(errs[2], pgnats.ErrPublishRejected) || !handler.IsPermanent(errs[2]) {
		t.Errorf("too large: %v, want a permanent ErrPublishRejected", errs[2])
	}
	if n := e.streamLen(t); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
}

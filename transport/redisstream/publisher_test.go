package redisstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/redisstream"
)

func TestPublisherConfigRejected(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, tc := range []struct {
		cfg  redisstream.PublisherConfig
		want string
	}{
		{redisstream.PublisherConfig{}, "Redis: is nil"},
		{redisstream.PublisherConfig{Redis: rdb, MaxLen: -1}, "MaxLen: is -1"},
	} {
		if _, err := redisstream.NewPublisher(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPublisher: %v, want an error containing %q", err, tc.want)
		}
	}
}

func newPublisher(t testing.TB, rdb redis.UniversalClient) *redisstream.Publisher {
	t.Helper()
	p, err := redisstream.NewPublisher(redisstream.PublisherConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// entries reads the whole stream.
func (e *env) entries(t testing.TB) []redis.XMessage {
	t.Helper()
	msgs, err := e.rdb.XRange(context.Background(), e.stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// Events emitted in transactions reach the stream through the relay, with
// the event ID in the message_id field and the event's fields, in emit
// order per ordering key.
func TestPublisherRelayEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, redisAddr(t))
	pool := relaytest.Pool(t, testDSN(t))
	ev := relaytest.Emit(t, pool, e.stream, 100)
	drill.Run(t, relaytest.Relay(t, pool, newPublisher(t, e.rdb), testlog.Errors(t)).Run)
	drill.Eventually(t, 30*time.Second, "every event marked PUBLISHED", func() bool { return relaytest.Published(t, pool) == len(ev.IDs) })
	var got relaytest.Received
	decode := redisstream.DecodeEvent(testConsumer)
	for _, m := range e.entries(t) {
		im, err := decode(m)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := m.Values[redisstream.DefaultIDField].(string)
		key, _ := m.Values[redisstream.FieldOrderingKey].(string)
		if want, ok := ev.Keys[id]; !ok || key != want || im.Source != relaytest.Source || im.EventType != relaytest.EventType ||
			im.SchemaVersion != relaytest.Version || im.Metadata[relaytest.MetadataKey] != relaytest.MetadataVal {
			t.Fatalf("entry %v (%+v) does not carry its event's fields", m.Values, im)
		}
		got.Add(id)
	}
	got.Report(t, "redis relay", ev, relaytest.Published(t, pool), false)
}

// A stream key holding another type fails that message permanently; the
// batch's other messages are added.
func TestPublisherWrongType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, redisAddr(t))
	ctx := context.Background()
	if err := e.rdb.Set(ctx, e.dead, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	msg := func(stream string) outbox.Message {
		return outbox.Message{ID: inboxtype.New(), Source: testSource, Destination: stream, EventType: "order.confirmed", SchemaVersion: 1, Payload: []byte(`{}`)}
	}
	errs := newPublisher(t, e.rdb).Publish(ctx, []outbox.Message{msg(e.stream), msg(e.dead)})
	if len(errs) != 2 || errs[0] != nil || !handler.IsPermanent(errs[1]) || !errors.Is(errs[1], redisstream.ErrNotAStream) {
		t.Fatalf("errors %v: want the second permanently failed, naming the key type", errs)
	}
	if n := len(e.entries(t)); n != 1 {
		t.Fatalf("stream holds %d entries, want 1", n)
	}
}

package redisstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
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
	p, err := redisstream.NewPublisher(redisstream.PublisherConfig{Redis: rdb, AllowNotDurable: true}) // the test Redis has no persistence
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

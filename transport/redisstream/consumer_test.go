package redisstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/redisstream"
)

func TestNewConsumerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // never used
	defer rdb.Close()
	client := newClient(t, newPool(t))
	e := &env{stream: "s", dead: "d", group: "g"}
	cases := []struct {
		name   string
		change func(*redisstream.Config)
		want   string
	}{
		{"redis", func(c *redisstream.Config) { c.Redis = nil }, "Config.Redis: is nil"},
		{"scope", func(c *redisstream.Config) { c.Scope = inbox.Scope{} }, "Config.Scope: is unset"},
		{"stream", func(c *redisstream.Config) { c.Stream = "" }, "Config.Stream: is required"},
		{"group", func(c *redisstream.Config) { c.Group = "" }, "Config.Group: is required"},
		{"decode", func(c *redisstream.Config) { c.Decode = nil }, "Config.Decode: is required"},
		{"dead letter", func(c *redisstream.Config) { c.DeadLetterStream = "" }, "Config.DeadLetterStream: is required"},
		{"same stream", func(c *redisstream.Config) { c.DeadLetterStream = c.Stream }, "Config.DeadLetterStream: must differ from Stream"},
		{"max deliveries", func(c *redisstream.Config) { c.DeliveryLimit = -1 }, "Config.DeliveryLimit: is -1"},
		{"claim idle", func(c *redisstream.Config) { c.ClaimIdle = time.Millisecond }, "Config.ClaimIdle: is 1ms"},
		{"block", func(c *redisstream.Config) { c.Block = -time.Second }, "Config.Block: is -1s"},
		{"batch size", func(c *redisstream.Config) { c.BatchSize = -1 }, "Config.BatchSize: is -1"},
	}
	for _, tc := range cases {
		cfg := e.config(rdb, nil)
		tc.change(&cfg)
		if _, err := redisstream.NewConsumer(client, cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := redisstream.NewConsumer(nil, e.config(rdb, nil)); err == nil || !strings.Contains(err.Error(), "pass an *inbox.Client") {
		t.Errorf("nil accepter: err = %v", err)
	}
}

// Entries that can never be accepted go to the dead-letter stream with their
// reason and are acknowledged; nothing reaches the inbox.
func TestRejectToDeadLetter(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	pool := newPool(t)
	e := newEnv(t, addr)
	start(t, newClient(t, pool), e.config(newRedis(t, addr), testlog.Errors(t)))

	want := map[string]struct{ reason, err string }{ // by entry ID
		e.add(t, "bad-json", `{"orderId":`):                                   {redisstream.ReasonInvalid, "invalid_json"},
		e.add(t, "no-payload", ""):                                            {redisstream.ReasonDecode, "no payload field"},
		e.add(t, "", `{"orderId":"o-1"}`):                                     {redisstream.ReasonDecode, `add a "message_id" field`},
		e.add(t, "too-deep", strings.Repeat("[", 70)+strings.Repeat("]", 70)): {redisstream.ReasonInvalid, "too_deep"},
	}
	drill.Eventually(t, 20*time.Second, "four dead letters", func() bool { return len(e.deadLetters(t)) == 4 })
	for _, dl := range e.deadLetters(t) {
		id, _ := dl.Values[redisstream.FieldEntryID].(string)
		w, ok := want[id]
		if !ok {
			t.Fatalf("dead letter of unknown entry %q: %v", id, dl.Values)
		}
		if dl.Values[redisstream.FieldReason] != w.reason || !strings.Contains(fmt.Sprint(dl.Values[redisstream.FieldError]), w.err) {
			t.Errorf("dead letter of %s: %v; want reason %q and an error with %q", id, dl.Values, w.reason, w.err)
		}
		if dl.Values[redisstream.FieldStream] != e.stream || dl.Values[redisstream.FieldDeliveries] != "1" {
			t.Errorf("dead letter of %s: origin fields %v", id, dl.Values)
		}
	}
	if n := e.unsettled(t); n != 0 {
		t.Fatalf("%d entries unacknowledged after dead-lettering", n)
	}
	if n := receipts(t, pool); n != 0 {
		t.Fatalf("%d receipts, want none", n)
	}
}

// Entries a crashed consumer read but never acknowledged are claimed after
// ClaimIdle and accepted.
func TestClaimsEntriesOfCrashedConsumer(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	pool := newPool(t)
	e := newEnv(t, addr)
	ctx := context.Background()
	if err := e.rdb.XGroupCreateMkStream(ctx, e.stream, e.group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e.add(t, fmt.Sprintf("m-%d", i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	// The crashed consumer: read everything, then never acknowledge.
	read, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: e.group, Consumer: "crashed", Streams: []string{e.stream, ">"}, Count: 10}).Result()
	if err != nil || len(read[0].Messages) != 5 {
		t.Fatalf("crashed consumer read %v, %v", read, err)
	}
	log, logs := testlog.Capture()
	start(t, newClient(t, pool), e.config(newRedis(t, addr), log))
	drill.Eventually(t, 20*time.Second, "the crashed consumer's entries acknowledged", func() bool { return e.unsettled(t) == 0 })
	if n := receipts(t, pool); n != 5 {
		t.Fatalf("%d receipts, want 5", n)
	}
	if !strings.Contains(logs.String(), "delivered=2") {
		t.Fatalf("claimed entries were not logged as second deliveries:\n%s", logs)
	}
}

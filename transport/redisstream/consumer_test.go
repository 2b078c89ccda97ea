package redisstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/transport/redisstream"
)

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t, redisAddr(t))
	client := newClient(t, newPool(t, testDSN(t)))
	e := &env{stream: "s", dead: "d", group: "g"}
	cases := []struct {
		name   string
		change func(*redisstream.Config)
		want   string
	}{
		{"stream", func(c *redisstream.Config) { c.Stream = "" }, "Config.Stream is required"},
		{"group", func(c *redisstream.Config) { c.Group = "" }, "Config.Group is required"},
		{"decode", func(c *redisstream.Config) { c.Decode = nil }, "Config.Decode is required"},
		{"dead letter", func(c *redisstream.Config) { c.DeadLetterStream = "" }, "Config.DeadLetterStream is required"},
		{"same stream", func(c *redisstream.Config) { c.DeadLetterStream = c.Stream }, "Config.DeadLetterStream must differ from Stream"},
		{"max deliveries", func(c *redisstream.Config) { c.MaxDeliveries = -1 }, "Config.MaxDeliveries is -1"},
		{"claim idle", func(c *redisstream.Config) { c.ClaimIdle = time.Millisecond }, "Config.ClaimIdle is 1ms"},
		{"block", func(c *redisstream.Config) { c.Block = -time.Second }, "Config.Block is -1s"},
		{"batch size", func(c *redisstream.Config) { c.BatchSize = -1 }, "Config.BatchSize is -1"},
	}
	for _, tc := range cases {
		cfg := e.config(nil)
		tc.change(&cfg)
		if _, err := redisstream.New(rdb, client, cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := redisstream.New(nil, client, e.config(nil)); err == nil || !strings.Contains(err.Error(), "Redis client is nil") {
		t.Errorf("nil Redis client: err = %v", err)
	}
	if _, err := redisstream.New(rdb, nil, e.config(nil)); err == nil || !strings.Contains(err.Error(), "inbox client is nil") {
		t.Errorf("nil inbox client: err = %v", err)
	}
}

// Accepted and duplicate entries are acknowledged; the receipt exists once.
// Entries added before the group existed are consumed too.
func TestAcceptThenAck(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, addr)
	e.add(t, "", `{"eventId":"evt-1","orderId":"o-1"}`) // before the group exists
	cfg := e.config(quietLogger(t))
	cfg.Decode = decodeByEventID
	run(t, newConsumer(t, newRedis(t, addr), newClient(t, pool), cfg))

	e.add(t, "", `{"eventId":"evt-2","orderId":"o-2"}`)
	e.add(t, "", `{"orderId":"o-1","eventId":"evt-1"}`) // redelivery by the producer: a new entry, keys reordered
	eventually(t, 20*time.Second, "all entries acknowledged", func() bool { return e.unsettled(t) == 0 })
	if n := receipts(t, pool); n != 2 {
		t.Fatalf("%d receipts, want 2", n)
	}
	if dl := e.deadLetters(t); len(dl) != 0 {
		t.Fatalf("%d dead letters, want none", len(dl))
	}
}

// Entries that can never be accepted go to the dead-letter stream with their
// reason and are acknowledged; nothing reaches the inbox.
func TestRejectToDeadLetter(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, addr)
	run(t, newConsumer(t, newRedis(t, addr), newClient(t, pool), e.config(quietLogger(t))))

	want := map[string]struct{ code, reason string }{ // by entry ID
		e.add(t, "bad-json", `{"orderId":`):                                   {redisstream.CodeInvalid, "invalid_json"},
		e.add(t, "no-id", ""):                                                 {redisstream.CodeDecode, "no payload field"},
		e.add(t, "", `{"orderId":"o-1"}`):                                     {redisstream.CodeDecode, `add a "message_id" field`},
		e.add(t, "too-deep", strings.Repeat("[", 70)+strings.Repeat("]", 70)): {redisstream.CodeInvalid, "too_deep"},
	}
	eventually(t, 20*time.Second, "four dead letters", func() bool { return len(e.deadLetters(t)) == 4 })
	for _, dl := range e.deadLetters(t) {
		id, _ := dl.Values[redisstream.FieldEntryID].(string)
		w, ok := want[id]
		if !ok {
			t.Fatalf("dead letter of unknown entry %q: %v", id, dl.Values)
		}
		if dl.Values[redisstream.FieldCode] != w.code || !strings.Contains(fmt.Sprint(dl.Values[redisstream.FieldReason]), w.reason) {
			t.Errorf("dead letter of %s: %v; want code %q and a reason containing %q", id, dl.Values, w.code, w.reason)
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
	pool := newPool(t, testDSN(t))
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
	log, logs := capture()
	run(t, newConsumer(t, newRedis(t, addr), newClient(t, pool), e.config(log)))
	eventually(t, 20*time.Second, "the crashed consumer's entries acknowledged", func() bool { return e.unsettled(t) == 0 })
	if n := receipts(t, pool); n != 5 {
		t.Fatalf("%d receipts, want 5", n)
	}
	if !strings.Contains(logs.String(), "delivered=2") {
		t.Fatalf("claimed entries were not logged as second deliveries:\n%s", logs)
	}
}

// Shutdown: Run returns nil after cancel, and a stopped consumer takes
// nothing.
func TestRunStops(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, addr)
	stop := run(t, newConsumer(t, newRedis(t, addr), newClient(t, pool), e.config(quietLogger(t))))
	e.add(t, "m-1", `{"orderId":"o-1"}`)
	eventually(t, 20*time.Second, "the entry acknowledged", func() bool { return e.unsettled(t) == 0 })
	stop()
	e.add(t, "m-2", `{"orderId":"o-2"}`)
	time.Sleep(300 * time.Millisecond)
	if n := e.unsettled(t); n != 1 {
		t.Fatalf("%d unsettled after stop, want 1", n)
	}
	if n := receipts(t, pool); n != 1 {
		t.Fatalf("%d receipts after stop, want 1", n)
	}
}

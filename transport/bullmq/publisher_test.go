package bullmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/bullmq"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

func TestPublisherConfigRejected(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, tc := range []struct {
		cfg  bullmq.PublisherConfig
		want string
	}{
		{bullmq.PublisherConfig{}, "PublisherConfig.Redis: is nil"},
		{bullmq.PublisherConfig{Redis: rdb, JobOptions: map[string]any{"delay": 10}}, `PublisherConfig.JobOptions: has "delay"`},
		{bullmq.PublisherConfig{Redis: rdb, JobOptions: map[string]any{"x": func() {}}}, "PublisherConfig.JobOptions: is not JSON"},
	} {
		if _, err := bullmq.NewPublisher(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("NewPublisher: %v, want a config error containing %q", err, tc.want)
		}
	}
}

func newPublisher(t testing.TB, rdb redis.UniversalClient) *bullmq.Publisher {
	t.Helper()
	p, err := bullmq.NewPublisher(bullmq.PublisherConfig{Redis: rdb, AllowNotDurable: true}) // the test Redis has no persistence
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// nodeWorkerJob is a job as a BullMQ Worker in Node received it.
type nodeWorkerJob struct {
	ID   string           `json:"id"`
	Name string           `json:"name"`
	Data bullmq.EventData `json:"data"`
}

// Events emitted in transactions reach a BullMQ Worker in Node through the
// relay: one job per event, its ID the event ID, its name the event type,
// its data the event.
func TestPublisherRelayToNodeWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pool := relaytest.Pool(t, testDSN(t))
	ev := relaytest.Emit(t, pool, e.queue, 40)
	drill.Run(t, relaytest.Relay(t, pool, newPublisher(t, e.rdb), testlog.Errors(t)).Run)
	drill.Eventually(t, 30*time.Second, "every event marked PUBLISHED", func() bool { return relaytest.Published(t, pool) == len(ev.IDs) })
	var jobs []nodeWorkerJob
	node(t, &jobs, "work", "redis://"+e.addr, e.queue, "40", "20000")
	var got relaytest.Received
	for _, j := range jobs {
		d := j.Data
		if want, ok := ev.Keys[j.ID]; !ok || d.EventID != j.ID || d.OrderingKey != want || j.Name != relaytest.EventType || d.EventType != relaytest.EventType ||
			d.Source != relaytest.Source || d.SchemaVersion != relaytest.Version || d.Metadata[relaytest.MetadataKey] != relaytest.MetadataVal || len(d.Payload) == 0 {
			t.Fatalf("job %+v does not carry its event", j)
		}
		got.Add(j.ID)
	}
	got.Report(t, "bullmq relay", ev, relaytest.Published(t, pool), false)
	states := e.states(t, ev.IDs[0])
	if s := states[ev.IDs[0]]; s.State != "completed" {
		t.Fatalf("after the Node worker: %+v, want completed", s)
	}
}

// An event published again while its job exists is not added again:
// BullMQ keeps one job per ID and records "duplicated".
func TestPublisherRepublishIsOneJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	msg := outbox.Message{ID: inboxtype.New(), Source: testSource, Destination: e.queue, EventType: "order.confirmed", SchemaVersion: 1, Payload: []byte(`{"orderId":"o-1"}`)}
	p := newPublisher(t, e.rdb)
	for range 2 {
		if errs := p.Publish(ctx, []outbox.Message{msg}); errs != nil {
			t.Fatal(errs)
		}
	}
	wait := bullmq.DefaultPrefix + ":" + e.queue + ":wait"
	if ids, err := e.rdb.LRange(ctx, wait, 0, -1).Result(); err != nil || len(ids) != 1 || ids[0] != msg.ID.String() {
		t.Fatalf("wait holds %v (%v), want the one job %s", ids, err, msg.ID)
	}
	events, err := e.rdb.XRange(ctx, bullmq.DefaultPrefix+":"+e.queue+":events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	dup := 0
	for _, m := range events {
		if m.Values["event"] == "duplicated" && m.Values["jobId"] == msg.ID.String() {
			dup++
		}
	}
	if dup != 1 {
		t.Fatalf("%d duplicated events, want 1: %v", dup, events)
	}
	if s := e.states(t, msg.ID.String())[msg.ID.String()]; s.State != "waiting" {
		t.Fatalf("BullMQ sees %+v, want waiting", s)
	}
}

// A queue key holding another type fails that message permanently; the
// batch's other messages are added.
func TestPublisherWrongType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	bad := e.queue + "-bad"
	badWait := bullmq.DefaultPrefix + ":" + bad + ":wait"
	if err := e.rdb.Set(ctx, badWait, "not a list", 0).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.rdb.Del(context.Background(), badWait, bullmq.DefaultPrefix+":"+bad+":events", bullmq.DefaultPrefix+":"+bad+":meta").Err()
	})
	msg := func(queue string) outbox.Message {
		return outbox.Message{ID: inboxtype.New(), Source: testSource, Destination: queue, EventType: "order.confirmed", SchemaVersion: 1, Payload: []byte(`{}`)}
	}
	msgs := []outbox.Message{msg(e.queue), msg(bad)}
	errs := newPublisher(t, e.rdb).Publish(ctx, msgs)
	if len(errs) != 2 || errs[0] != nil || !handler.IsPermanent(errs[1]) || !errors.Is(errs[1], bullmq.ErrWrongType) {
		t.Fatalf("errors %v: want the second permanently failed, naming the key type", errs)
	}
	_ = e.rdb.Del(ctx, bullmq.DefaultPrefix+":"+bad+":"+msgs[1].ID.String()).Err()
}

// Jobs the Publisher added are accepted by a Consumer with DecodeEvent:
// the receipt carries the event's identity and content.
func TestPublisherToConsumer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pool := newPool(t)
	ctx := context.Background()
	msg := outbox.Message{ID: inboxtype.New(), Source: "orders", Destination: e.queue, EventType: drill.EventType, SchemaVersion: drill.SchemaVersion,
		Payload: json.RawMessage(`{"orderId":"o-1"}`), Metadata: map[string]string{"k": "v"}}
	if errs := newPublisher(t, e.rdb).Publish(ctx, []outbox.Message{msg}); errs != nil {
		t.Fatal(errs)
	}
	cfg := e.config(testlog.Errors(t))
	cfg.Decode = bullmq.DecodeEvent(testConsumer)
	start(t, newClient(t, pool), cfg)
	drill.Eventually(t, 30*time.Second, "the job completed", func() bool { return e.states(t, msg.ID.String())[msg.ID.String()].State == "completed" })
	var source, messageID, eventType string
	if err := pool.QueryRow(ctx, `SELECT source, message_id, event_type FROM pginbox_receipts_live`).Scan(&source, &messageID, &eventType); err != nil {
		t.Fatal(err)
	}
	if source != "orders" || messageID != msg.ID.String() || eventType != drill.EventType {
		t.Fatalf("receipt %s/%s/%s, want the event's identity", source, messageID, eventType)
	}
}

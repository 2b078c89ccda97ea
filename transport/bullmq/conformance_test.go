//go:build unix

package bullmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/bullmq"
	"github.com/pginbox/pginbox/transport/internal/conformance"
	"github.com/pginbox/pginbox/transport/internal/drill"
)

func TestConsumerConformance(t *testing.T) {
	t.Parallel()
	conformance.RunConsumer(t, &driver{})
}

func TestPublisherConformance(t *testing.T) {
	t.Parallel()
	conformance.RunPublisher(t, &driver{})
}

// driver runs the conformance suites on BullMQ queues in Redis. Every case
// applies: a job's attempts started ("ats") are its delivery count, and the
// failed set is its dead letter.
type driver struct {
	redis conformance.RedisServers // the private, persisting servers
}

func (d *driver) SharedAddr(t *testing.T) string { return redisAddr(t) }

// PrivateBroker is a redis-server persisting every write before it answers
// (appendonly yes, appendfsync always), as the README asks of a queue's
// Redis.
func (d *driver) PrivateBroker(t *testing.T) conformance.Broker { return d.redis.Start(t) }

func (d *driver) Skip(conformance.Case) string { return "" } // every case applies

// Deduplicates: the job ID is the event ID, and BullMQ keeps one job per ID
// while it exists (nothing removes the destination's jobs in these cases).
func (d *driver) Deduplicates() bool { return true }

func (d *driver) NewChannel(t *testing.T, addr string) conformance.Channel {
	return newQueue(t, addr)
}

func (d *driver) NewDestination(t testing.TB, addr string) conformance.Destination {
	return newQueue(t, addr)
}

// NewPublisher checks persistence on private servers; the shared test Redis
// has none (TestPublisherRefusesVolatileRedis covers the refusal).
func (d *driver) NewPublisher(t testing.TB, addr string) outbox.Publisher {
	p, err := bullmq.NewPublisher(bullmq.PublisherConfig{Redis: newRedis(t, addr), AllowNotDurable: !d.redis.Started(addr)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// queue is one case's BullMQ queue, with a direct client for setup and
// checks.
type queue struct{ e *env }

func newQueue(t testing.TB, addr string) queue {
	e := &env{addr: addr, rdb: newRedis(t, addr), queue: "pgi-conf-" + randomID()}
	t.Cleanup(e.cleanup)
	return queue{e}
}

// confJob is the data of a job the suite sends: the message ID travels in
// the data (Config.IDField), as with producers that let BullMQ number jobs,
// so a redelivery is a new job with the same message ID. The payload is a
// string: the suite sends payloads that are not JSON.
type confJob struct {
	MessageID string `json:"messageId"`
	Payload   string `json:"payload"`
}

// Send adds a job numbered like BullMQ's Queue.add without a jobId (INCR of
// the queue's id key).
func (q queue) Send(t testing.TB, id, payload string) {
	ctx := context.Background()
	n, err := q.e.rdb.Incr(ctx, bullmq.DefaultPrefix+":"+q.e.queue+":id").Result()
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(confJob{MessageID: id, Payload: payload})
	added, err := bullmq.AddJob(ctx, q.e.rdb, q.e.queue, strconv.FormatInt(n, 10), "conformance", string(data))
	if err != nil || !added {
		t.Fatalf("adding job %d (%s): added %v, %v", n, id, added, err)
	}
}

// decodeConformance maps a job for the suite; an empty payload fails.
func decodeConformance(j bullmq.Job) (inbox.Message, error) {
	var d confJob
	if err := json.Unmarshal(j.Data, &d); err != nil {
		return inbox.Message{}, err
	}
	if d.Payload == "" {
		return inbox.Message{}, errors.New("empty payload")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: conformance.Source, Consumer: conformance.Consumer},
		EventType:     conformance.EventType,
		SchemaVersion: conformance.SchemaVersion,
		Payload:       json.RawMessage(d.Payload),
	}, nil
}

func (q queue) Start(t testing.TB, s conformance.Setup) (func(), error) {
	rdb := newRedis(t, s.Addr)
	limit := int64(s.DeliveryLimit)
	if limit == 0 {
		limit = 1000 // outlasts any outage a case makes
	}
	consumer, err := bullmq.NewConsumer(s.Accepter, bullmq.Config{
		Redis:   rdb,
		Queue:   q.e.queue,
		Scope:   s.Scope,
		Decode:  decodeConformance,
		IDField: "messageId",
		Worker:  "conf-" + randomID(),
		// An accept gets half of the lock: a second is too short on a
		// loaded machine running the suite's cases in parallel.
		LockDuration:  4 * time.Second,
		DeliveryLimit: limit,
		Logger:        s.Log,
	})
	if err != nil {
		return nil, err
	}
	return drill.Run(t, consumer.Run), nil
}

// Unsettled counts the jobs neither completed nor failed, in one
// transaction: a job moving between two keys is counted once.
func (q queue) Unsettled(t testing.TB) int {
	base := bullmq.DefaultPrefix + ":" + q.e.queue + ":"
	var lens []*redis.IntCmd
	_, err := q.e.rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		for _, l := range []string{"wait", "active", "paused"} {
			lens = append(lens, p.LLen(context.Background(), base+l))
		}
		for _, z := range []string{"prioritized", "delayed"} {
			lens = append(lens, p.ZCard(context.Background(), base+z))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range lens {
		n += int(c.Val())
	}
	return n
}

// DeadLetters is the queue's failed set, with the reason and receipt the
// consumer put on each job.
func (q queue) DeadLetters(t testing.TB) []conformance.DeadLetter {
	ctx := context.Background()
	base := bullmq.DefaultPrefix + ":" + q.e.queue + ":"
	ids, err := q.e.rdb.ZRange(ctx, base+"failed", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []conformance.DeadLetter
	for _, id := range ids {
		f, err := q.e.rdb.HGetAll(ctx, base+id).Result()
		if err != nil {
			t.Fatal(err)
		}
		var d confJob
		if err := json.Unmarshal([]byte(f["data"]), &d); err != nil {
			t.Fatalf("failed job %s: data %q: %v", id, f["data"], err)
		}
		out = append(out, conformance.DeadLetter{MessageID: d.MessageID, Reason: f[bullmq.FieldReason], Payload: d.Payload, Receipt: f[bullmq.FieldReceipt]})
	}
	return out
}

func (q queue) Name() string { return q.e.queue }

// Read is the jobs the Publisher added, in the order they were added
// (nothing consumes the destination: they are all in wait, newest first),
// decoded with DecodeEvent.
func (q queue) Read(t testing.TB) []conformance.Delivered {
	ctx := context.Background()
	base := bullmq.DefaultPrefix + ":" + q.e.queue + ":"
	ids, err := q.e.rdb.LRange(ctx, base+"wait", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(ids)
	decode := bullmq.DecodeEvent(conformance.Consumer)
	var out []conformance.Delivered
	for _, id := range ids {
		data, err := q.e.rdb.HGet(ctx, base+id, "data").Result()
		if err != nil {
			t.Fatal(fmt.Errorf("job %s: %w", id, err))
		}
		msg, err := decode(bullmq.Job{ID: id, Data: []byte(data)})
		if err != nil {
			t.Fatal(fmt.Errorf("job %s: %w", id, err))
		}
		var ev bullmq.EventData
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.EventID != id {
			t.Fatalf("job %s carries event %s: the job ID must be the event ID", id, ev.EventID)
		}
		out = append(out, conformance.Delivered{ID: ev.EventID, OrderingKey: ev.OrderingKey, Source: msg.Source,
			EventType: msg.EventType, SchemaVersion: msg.SchemaVersion, Metadata: msg.Metadata})
	}
	return out
}

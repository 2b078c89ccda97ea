package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/kafka"
)

const (
	testSource   = "orders"
	testConsumer = "drill.v1"
	idHeader     = "message-id"
	topic        = "events"
	deadTopic    = "events.dead"
	group        = "inbox"
)

// rig is a private in-process Kafka cluster (kfake, the real protocol on a
// loopback port) with the topic and its dead-letter topic.
type rig struct {
	cluster *kfake.Cluster
	addrs   []string
	admin   *kgo.Client
	// sent[partition] lists message IDs in offset order.
	mu   sync.Mutex
	sent map[int32][]string
}

func newRig(t testing.TB, partitions int32, opts ...kfake.Opt) *rig {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic, deadTopic)}, opts...)...)
	must(t, err)
	t.Cleanup(c.Close)
	r := &rig{cluster: c, addrs: c.ListenAddrs(), sent: map[int32][]string{}}
	r.admin, err = kgo.NewClient(kgo.SeedBrokers(r.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	must(t, err)
	t.Cleanup(r.admin.Close)
	return r
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// produce writes one record to partition p; an empty id sends no ID header.
func (r *rig) produce(t testing.TB, p int32, id, value string) {
	t.Helper()
	rec := &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)}
	if id != "" {
		rec.Headers = []kgo.RecordHeader{{Key: idHeader, Value: []byte(id)}}
	}
	must(t, r.admin.ProduceSync(context.Background(), rec).FirstErr())
	r.mu.Lock()
	r.sent[p] = append(r.sent[p], id)
	r.mu.Unlock()
}

// produceAll writes n records with distinct IDs round-robin over partitions.
func (r *rig) produceAll(t testing.TB, prefix string, n int, partitions int32) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%04d", prefix, i)
		r.produce(t, int32(i)%partitions, ids[i], fmt.Sprintf(`{"n":%d}`, i))
	}
	return ids
}

// committed is the group's committed offset per partition of topic (-1 when
// none).
func (r *rig) committed(t testing.TB) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	resp, err := kadm.NewClient(r.admin).FetchOffsets(context.Background(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out // nothing committed yet
	}
	must(t, err)
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			must(t, o.Err)
			out[o.Partition] = o.At
		}
	})
	return out
}

// committedAll reports whether every record sent so far is behind the
// group's committed offsets.
func (r *rig) committedAll(t testing.TB) bool {
	t.Helper()
	c := r.committed(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, ids := range r.sent {
		if c[p] != int64(len(ids)) {
			return false
		}
	}
	return true
}

// checkNoCommitPastUnaccepted fails the test if a committed offset passes a
// record that has no receipt (and was not expected in the dead-letter topic).
func (r *rig) checkNoCommitPastUnaccepted(t testing.TB, pool *pgxpool.Pool, deadLettered map[string]bool) {
	t.Helper()
	// Offsets first, receipts second: a consumer still running may accept
	// and commit in between, and a receipt is stored before its offset is
	// committed, so this order never reports an offset committed after the
	// receipts were read as unaccepted.
	c := r.committed(t)
	stored := map[string]bool{}
	rows, err := pool.Query(context.Background(), "SELECT message_id FROM pginbox_receipts_live")
	must(t, err)
	for rows.Next() {
		var id string
		must(t, rows.Scan(&id))
		stored[id] = true
	}
	must(t, rows.Err())
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, ids := range r.sent {
		for off := int64(0); off < c[p] && off < int64(len(ids)); off++ {
			if id := ids[off]; !stored[id] && !deadLettered[id] {
				t.Fatalf("partition %d committed at %d, past offset %d (%q), which was never accepted", p, c[p], off, id)
			}
		}
	}
}

// dead reads n records from the dead-letter topic.
func (r *rig) dead(t testing.TB, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addrs...), kgo.ConsumeTopics(deadTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	must(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d dead letters", len(out), n)
		}
		out = append(out, f.Records()...)
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// decode is the test's mapping: ID header, JSON value.
func decode(r *kgo.Record) (inbox.Message, error) {
	id := header(r, idHeader)
	if id == "" {
		return inbox.Message{}, errors.New("no message-id header: the producer must set its event ID there")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: testSource, Consumer: testConsumer, MessageID: id},
		EventType:     drill.EventType,
		SchemaVersion: drill.SchemaVersion,
		Payload:       r.Value,
	}, nil
}

func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{testConsumer}})
	must(t, err)
	return c
}

func (r *rig) config(t testing.TB) kafka.Config {
	return kafka.Config{
		Brokers:         r.addrs,
		Topics:          []string{topic},
		Group:           group,
		Scope:           inbox.Tenant("tenant-a"),
		Decode:          decode,
		DeadLetterTopic: deadTopic,
		RetryDelay:      20 * time.Millisecond,
		MaxRetryDelay:   200 * time.Millisecond,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// run starts c and returns a function that stops it.
func run(t testing.TB, c *kafka.Consumer) (stop func()) { return drill.Run(t, c.Run) }

// outcomes wraps an Accepter and counts item outcomes.
type outcomes struct {
	kafka.Accepter
	mu     sync.Mutex
	counts map[inbox.Outcome]int
}

func (o *outcomes) AcceptBatch(ctx context.Context, msgs []inbox.Message) ([]inbox.BatchItem, error) {
	items, err := o.Accepter.AcceptBatch(ctx, msgs)
	if err == nil {
		o.mu.Lock()
		if o.counts == nil {
			o.counts = map[inbox.Outcome]int{}
		}
		for _, it := range items {
			o.counts[it.Outcome]++
		}
		o.mu.Unlock()
	}
	return items, err
}

func (o *outcomes) get(k inbox.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[k]
}

package kafka_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/kafka"
)

func TestPublisherConfigRejected(t *testing.T) {
	t.Parallel()
	seeds := []string{"127.0.0.1:1"}
	for _, tc := range []struct {
		cfg  kafka.PublisherConfig
		want string
	}{
		{kafka.PublisherConfig{}, "Brokers: is empty"},
		{kafka.PublisherConfig{Brokers: seeds, ClientOptions: []kgo.Opt{kgo.DisableIdempotentWrite()}}, "remove kgo.DisableIdempotentWrite"},
		{kafka.PublisherConfig{Brokers: seeds, ClientOptions: []kgo.Opt{kgo.AllowIdempotentProduceCancellation()}}, "remove kgo.AllowIdempotentProduceCancellation"},
		{kafka.PublisherConfig{Brokers: seeds, ClientOptions: []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck())}}, "acks=all"},
	} {
		p, err := kafka.NewPublisher(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			if p != nil {
				p.Close()
			}
			t.Errorf("NewPublisher(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

func newPublisher(t testing.TB, r *rig, opts ...kgo.Opt) *kafka.Publisher {
	t.Helper()
	p, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: r.addrs, ClientOptions: opts})
	must(t, err)
	t.Cleanup(p.Close)
	return p
}

// readAll reads n records of topic from the start, failing after 30s.
func (r *rig) readAll(t testing.TB, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	must(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(out), n)
		}
		out = append(out, f.Records()...)
	}
	return out
}

// Events emitted in transactions reach the topic through the relay, keyed
// by ordering key, with the event's ID, type, version, source and metadata
// in headers, in emit order per key.
func TestPublisherRelayEndToEnd(t *testing.T) {
	t.Parallel()
	r := newRig(t, 3)
	pool := relaytest.Pool(t, testDSN(t))
	e := relaytest.Emit(t, pool, topic, 100)
	drill.Run(t, relaytest.Relay(t, pool, newPublisher(t, r), testlog.Errors(t)).Run)

	recs := r.readAll(t, len(e.IDs))
	decode := kafka.DecodeEvent(testConsumer)
	var got relaytest.Received
	partitionOf := map[string]int32{}
	// Records arrive per partition; a key lives in one, so per-key order
	// holds in the concatenation.
	for _, rec := range recs {
		m, err := decode(rec)
		must(t, err)
		want := e.Keys[m.MessageID]
		if want == "" {
			want = m.MessageID
		}
		if string(rec.Key) != want || m.Source != relaytest.Source || m.EventType != relaytest.EventType ||
			m.SchemaVersion != relaytest.Version || m.Metadata[relaytest.MetadataKey] != relaytest.MetadataVal {
			t.Fatalf("record %+v (message %+v) does not carry its event's fields", rec, m)
		}
		if p, ok := partitionOf[string(rec.Key)]; ok && p != rec.Partition {
			t.Fatalf("key %q in partitions %d and %d", rec.Key, p, rec.Partition)
		}
		partitionOf[string(rec.Key)] = rec.Partition
		got.Add(m.MessageID)
	}
	drill.Eventually(t, 30*time.Second, "every event marked PUBLISHED", func() bool { return relaytest.Published(t, pool) == len(e.IDs) })
	got.Report(t, "kafka relay", e, relaytest.Published(t, pool), false)
}

// A record larger than the producer's batch limit fails permanently; the
// batch's other records are written.
func TestPublisherTooLarge(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	p := newPublisher(t, r, kgo.ProducerBatchMaxBytes(1024))
	msg := func(body string) outbox.Message {
		return outbox.Message{ID: inboxtype.New(), Source: testSource, Destination: topic, EventType: drill.EventType, SchemaVersion: 1, Payload: []byte(body)}
	}
	errs := p.Publish(context.Background(), []outbox.Message{msg(`{"n":1}`), msg(`"` + strings.Repeat("x", 4096) + `"`)})
	if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], kafka.ErrRecordRejected) || !handler.IsPermanent(errs[1]) {
		t.Fatalf("errors %v: want the second rejected permanently", errs)
	}
	if recs := r.readAll(t, 1); len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
}

// The broker drops the producer's connection on several produce requests
// while the relay streams events: the client reconnects and retries, and
// every event is in the topic, in order per key.
func TestPublisherDrillBrokerFault(t *testing.T) {
	t.Parallel()
	r := newRig(t, 3)
	pool := relaytest.Pool(t, testDSN(t))
	const n, faults = 300, 5
	e := relaytest.Emit(t, pool, topic, n)
	cut := 0
	r.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		r.cluster.KeepControl()
		if cut++; cut%3 != 0 || cut > 3*faults {
			return nil, nil, false // handled normally
		}
		return nil, errors.New("injected fault"), true // kfake closes the connection
	})
	drill.Run(t, relaytest.Relay(t, pool, newPublisher(t, r), testlog.Errors(t)).Run)
	drill.Eventually(t, 60*time.Second, "every event published", func() bool { return relaytest.Published(t, pool) == n })
	if cut < 3*faults {
		t.Fatalf("only %d produce requests: the faults did not all fire", cut)
	}
	recs := r.readAll(t, n)
	var got relaytest.Received
	decode := kafka.DecodeEvent(testConsumer)
	for _, rec := range recs {
		m, err := decode(rec)
		must(t, err)
		got.Add(m.MessageID)
	}
	got.Report(t, "kafka publisher broker-fault", e, relaytest.Published(t, pool), true)
}

// Publish returns when its context ends while the broker holds the produce
// request; the record, already sent, is still written afterwards (a copy
// the receiving inbox would drop when the relay retries).
func TestPublisherHonoursContext(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	r.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		r.cluster.SleepControl(func() { <-release })
		return nil, nil, false // then handled normally
	})
	p := newPublisher(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	errs := p.Publish(ctx, []outbox.Message{{ID: inboxtype.New(), Source: testSource, Destination: topic, EventType: drill.EventType, SchemaVersion: 1, Payload: []byte(`{}`)}})
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Publish took %v after a 500ms context", took)
	}
	if len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Fatalf("errors %v: want the context's deadline", errs)
	}
	free()
	if recs := r.readAll(t, 1); len(recs) != 1 {
		t.Fatalf("%d records, want the one sent before the deadline", len(recs))
	}
}

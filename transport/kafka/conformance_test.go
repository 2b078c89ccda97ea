//go:build unix

package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/conformance"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/kafka"
)

func TestConsumerConformance(t *testing.T) {
	t.Parallel()
	conformance.RunConsumer(t, driver{})
}

func TestPublisherConformance(t *testing.T) {
	t.Parallel()
	conformance.RunPublisher(t, driver{})
}

// driver runs the conformance suites on kfake (the Kafka protocol,
// in-process), one-partition topics.
type driver struct{}

// shared is the test binary's cluster for the cases without a restart.
var shared = sync.OnceValues(func() (*kfake.Cluster, error) { return kfake.NewCluster(kfake.NumBrokers(1)) })

func (driver) SharedAddr(t *testing.T) string {
	c, err := shared()
	if err != nil {
		t.Fatal(err)
	}
	return c.ListenAddrs()[0]
}

// PrivateBroker is a kfake cluster in a process of its own, killed with
// SIGKILL by Restart (see startKfakeProcess).
func (driver) PrivateBroker(t *testing.T) conformance.Broker { return startKfakeProcess(t) }

func (driver) Skip(conformance.Case) string { return "" }

func (driver) Deduplicates() bool { return false } // a republished event is a second record

// dialTo makes a client dial addr whatever broker address the metadata
// names: the suite puts a fault proxy in front of the one broker.
func dialTo(addr string) kgo.Opt {
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	})
}

// topicAt is a fresh one-partition topic and its admin client on the
// broker at addr.
type topicAt struct {
	addr, name string
	cl         *kgo.Client
}

func newTopicAt(t testing.TB, addr, name string) *topicAt {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), dialTo(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	must(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, name); err != nil {
		t.Fatalf("creating topic %s: %v", name, err)
	}
	return &topicAt{addr: addr, name: name, cl: cl}
}

// end is the topic's end offset (the records it holds).
func (tp *topicAt) end(t testing.TB) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(tp.cl).ListEndOffsets(ctx, tp.name)
	must(t, err)
	o, ok := offs.Lookup(tp.name, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %v", tp.name, o.Err)
	}
	return o.Offset
}

// readAll is every record of the topic, from the start, failing after 30s.
func (tp *topicAt) readAll(t testing.TB) []*kgo.Record {
	t.Helper()
	n := tp.end(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tp.addr), dialTo(tp.addr), kgo.ConsumeTopics(tp.name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	must(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for int64(len(out)) < n {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records of %s", len(out), n, tp.name)
		}
		out = append(out, f.Records()...)
	}
	return out
}

func (driver) NewChannel(t *testing.T, addr string) conformance.Channel {
	name := "conf-" + randomName()
	return &channel{topic: newTopicAt(t, addr, name), dead: newTopicAt(t, addr, name+".dead"), group: name}
}

func (driver) NewDestination(t testing.TB, addr string) conformance.Destination {
	return &channel{topic: newTopicAt(t, addr, "conf-dest-"+randomName())}
}

func (driver) NewPublisher(t testing.TB, addr string) outbox.Publisher {
	p, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: []string{addr}, ClientOptions: []kgo.Opt{dialTo(addr)}})
	must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func randomName() string { return fmt.Sprintf("%d", time.Now().UnixNano()) }

type channel struct {
	topic, dead *topicAt
	group       string

	mu   sync.Mutex
	sent int64
}

func (c *channel) Send(t testing.TB, id, payload string) {
	rec := &kgo.Record{Topic: c.topic.name, Value: []byte(payload), Headers: []kgo.RecordHeader{{Key: idHeader, Value: []byte(id)}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, c.topic.cl.ProduceSync(ctx, rec).FirstErr())
	c.mu.Lock()
	c.sent++
	c.mu.Unlock()
}

// decodeConformance maps a record for the suite; an empty value fails.
func decodeConformance(r *kgo.Record) (inbox.Message, error) {
	if len(r.Value) == 0 {
		return inbox.Message{}, errors.New("empty value")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: conformance.Source, Consumer: conformance.Consumer, MessageID: header(r, idHeader)},
		EventType:     conformance.EventType,
		SchemaVersion: conformance.SchemaVersion,
		Payload:       r.Value,
	}, nil
}

// batchAccepter gives the suite's Accepter, which takes one message at a
// time (its spy counts each), the batch interface the consumer uses. A
// retryable failure fails the batch, as a failed transaction would: the
// consumer re-reads from its first record.
type batchAccepter struct{ acc conformance.Accepter }

func (b batchAccepter) AcceptBatch(ctx context.Context, msgs []inbox.Message) ([]inbox.BatchItem, error) {
	items := make([]inbox.BatchItem, len(msgs))
	for i, m := range msgs {
		res, err := b.acc.Accept(ctx, m)
		switch inbox.ActionFor(err) {
		case inbox.ActionAck:
			items[i] = inbox.BatchItem{Outcome: res.Outcome, ID: res.ID, Status: res.Status}
		case inbox.ActionReject:
			items[i] = inbox.BatchItem{Outcome: inbox.Invalid, Err: err}
			if _, ok := errors.AsType[*inbox.ConflictError](err); ok {
				items[i].Outcome = inbox.Conflict
			}
		default:
			return nil, err
		}
	}
	return items, nil
}

func (c *channel) Start(t testing.TB, s conformance.Setup) (func(), error) {
	limit := s.DeliveryLimit
	if limit == 0 {
		limit = 1000 // outlasts any outage a case makes
	}
	consumer, err := kafka.NewConsumer(batchAccepter{s.Accepter}, kafka.Config{
		Brokers:         []string{s.Addr},
		Topics:          []string{c.topic.name},
		Group:           c.group,
		Scope:           s.Scope,
		Decode:          decodeConformance,
		DeadLetterTopic: c.dead.name,
		DeliveryLimit:   limit,
		RetryDelay:      20 * time.Millisecond,
		MaxRetryDelay:   200 * time.Millisecond,
		AcceptTimeout:   5 * time.Second, // a held accept of the cancel case ends soon after the stop
		ClientOptions:   []kgo.Opt{dialTo(s.Addr)},
		Logger:          s.Log,
	})
	if err != nil {
		return nil, err
	}
	return drill.Run(t, consumer.Run), nil
}

// Unsettled is the records past the group's committed offset: a record is
// settled when the offset passes it (accepted or dead-lettered).
func (c *channel) Unsettled(t testing.TB) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var committed int64
	var resp kadm.OffsetResponses
	testkit.EventuallyNoError(t, 30*time.Second, func() error { // a restarted broker closed the connection
		var err error
		resp, err = kadm.NewClient(c.topic.cl).FetchOffsets(ctx, c.group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			return nil
		}
		return err
	}, "the group's offsets")
	if o, ok := resp.Lookup(c.topic.name, 0); ok && o.Err == nil && o.At > 0 {
		committed = o.At
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.sent - committed)
}

func (c *channel) DeadLetters(t testing.TB) []conformance.DeadLetter {
	var out []conformance.DeadLetter
	for _, r := range c.dead.readAll(t) {
		out = append(out, conformance.DeadLetter{MessageID: header(r, idHeader), Reason: header(r, "pginbox-reason"),
			Payload: string(r.Value), Receipt: header(r, "pginbox-receipt")})
	}
	return out
}

func (c *channel) Name() string { return c.topic.name }

func (c *channel) Read(t testing.TB) []conformance.Delivered {
	decode := kafka.DecodeEvent(conformance.Consumer)
	var out []conformance.Delivered
	for _, r := range c.topic.readAll(t) {
		m, err := decode(r)
		if err != nil {
			t.Fatalf("record at %d: %v", r.Offset, err)
		}
		out = append(out, conformance.Delivered{ID: m.MessageID, OrderingKey: header(r, kafka.HeaderOrderingKey), Source: m.Source,
			EventType: m.EventType, SchemaVersion: m.SchemaVersion, Metadata: m.Metadata})
	}
	return out
}

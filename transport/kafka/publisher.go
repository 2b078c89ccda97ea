package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Publisher produces outbox events to Kafka for an outbox.Relay with the
// idempotent producer and acks from all in-sync replicas. The record key is
// the ordering key, so the events of a key go to one partition in order; an
// event without one is keyed by its ID. Create it with NewPublisher and
// Close it when the relay stopped.
type Publisher struct {
	cfg PublisherConfig
	cl  *kgo.Client
}

// NewPublisher returns a Publisher with its own franz-go client.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg, err := cfgerr.Ready(cfg, PublisherConfig.withDefaults, PublisherConfig.validate)
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("pginbox/kafka: NewPublisher: %w", err)
	}
	if err := checkProducer(cl); err != nil {
		cl.Close()
		return nil, err
	}
	return &Publisher{cfg: cfg, cl: cl}, nil
}

// Close flushes nothing and closes the client: records still buffered fail,
// and the relay publishes their events again.
func (p *Publisher) Close() error { p.cl.Close(); return nil }

// Publish produces msgs and waits until each was acknowledged or failed, or
// ctx ended; see outbox.Publisher.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i, m := range msgs {
		wg.Add(1)
		p.cl.Produce(ctx, p.record(m), func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				errs[i] = produceError(err)
				mu.Unlock()
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		// Records in flight cannot be recalled (the idempotent producer
		// must learn their fate); they may still be written, and a repeat
		// of the event is a duplicate the receiver drops.
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-done: // finished meanwhile
		default:
			out := make([]error, len(errs))
			copy(out, errs)
			return fill(out, fmt.Errorf("pginbox/kafka: no acknowledgement before the publish timeout (the relay retries; raise RelayConfig.PublishTimeout if the cluster is slow): %w", ctx.Err()))
		}
	}
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

// record maps an event to its Kafka record.
func (p *Publisher) record(m outbox.Message) *kgo.Record {
	key := m.OrderingKey
	if key == "" {
		key = m.ID.String()
	}
	h := []kgo.RecordHeader{
		{Key: HeaderEventID, Value: []byte(m.ID.String())},
		{Key: HeaderEventType, Value: []byte(m.EventType)},
		{Key: HeaderSchemaVersion, Value: []byte(strconv.Itoa(m.SchemaVersion))},
		{Key: HeaderSource, Value: []byte(m.Source)},
	}
	if m.OrderingKey != "" {
		h = append(h, kgo.RecordHeader{Key: HeaderOrderingKey, Value: []byte(m.OrderingKey)})
	}
	for k, v := range m.Metadata {
		h = append(h, kgo.RecordHeader{Key: HeaderMetadataPrefix + k, Value: []byte(v)})
	}
	return &kgo.Record{Topic: p.cfg.Topic(m), Key: []byte(key), Value: m.Payload, Headers: h, Timestamp: m.EmittedAt}
}

// produceError maps a record's failure: permanent when the same record can
// never be written, retryable otherwise.
func produceError(err error) error {
	for _, permanent := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidTopicException} {
		if errors.Is(err, permanent) {
			return handler.Permanent(fmt.Errorf("%w: %w: fix the event or the topic's limits (max.message.bytes), then requeue it", ErrRecordRejected, err))
		}
	}
	return fmt.Errorf("pginbox/kafka: producing (the relay retries): %w", err)
}

func fill(errs []error, err error) []error {
	for i := range errs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
	return errs
}

package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Record headers the Publisher sets. The record key is the event's ordering
// key, or its ID when it has none.
const (
	HeaderEventID       = "pginbox-event-id"
	HeaderEventType     = "pginbox-event-type"
	HeaderSchemaVersion = "pginbox-schema-version" // decimal
	HeaderSource        = "pginbox-source"
	HeaderOrderingKey   = "pginbox-ordering-key" // absent when the event has none
	// HeaderMetadataPrefix prefixes one header per metadata entry.
	HeaderMetadataPrefix = "pginbox-md-"
)

// ErrRecordRejected is the error of a record the client or broker refused
// for good (too large, invalid): retrying the same record cannot help.
var ErrRecordRejected = errors.New("pginbox/kafka: record rejected")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Brokers are seed addresses, host:port. Required.
	Brokers []string

	// Topic returns the topic of a message. Defaults to its Destination.
	Topic func(outbox.Message) string

	// ClientOptions are added to the franz-go client's options: TLS, SASL,
	// linger, batch size; optional. The Publisher keeps the idempotent producer and
	// acks from all in-sync replicas (franz-go's defaults): options that
	// disable idempotent writes, allow cancelling idempotent in-flight
	// records, or lower the acks are rejected.
	ClientOptions []kgo.Opt
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	c.Topic = cfgerr.Destination(c.Topic)
	return c
}

func (c PublisherConfig) validate() error {
	if len(c.Brokers) == 0 {
		return cfgerr.New("kafka", "PublisherConfig.Brokers is empty: list at least one host:port")
	}
	return nil
}

// checkProducer rejects a client that could lose or reorder records of a
// key, or write one twice on a retried request.
func checkProducer(cl *kgo.Client) error {
	if v, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); v {
		return cfgerr.New("kafka", "PublisherConfig.ClientOptions disable idempotent writes: remove kgo.DisableIdempotentWrite; a retried produce request could then write a record twice or out of order")
	}
	if v, _ := cl.OptValue(kgo.AllowIdempotentProduceCancellation).(bool); v {
		return cfgerr.New("kafka", "PublisherConfig.ClientOptions allow idempotent produce cancellation: remove kgo.AllowIdempotentProduceCancellation; it breaks the idempotent producer's guarantees")
	}
	if v, ok := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); !ok || v != kgo.AllISRAcks() {
		return cfgerr.New("kafka", "PublisherConfig.ClientOptions set RequiredAcks to %v: remove it (the idempotent producer needs acks from all in-sync replicas, and a record acked by the leader only can be lost)", v)
	}
	return nil
}

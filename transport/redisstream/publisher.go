package redisstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/redisbase"
)

// Entry fields the Publisher writes. The event ID goes into DefaultIDField,
// which a Consumer reads by default.
const (
	FieldEventType     = "event_type"
	FieldSchemaVersion = "schema_version" // decimal
	FieldSource        = "source"
	FieldOrderingKey   = "ordering_key" // absent when the event has none
	FieldMetadata      = "metadata"     // a JSON object of strings; absent when empty
	FieldPayload       = "payload"      // the event's JSON
)

// ErrNotAStream is the error of an entry whose stream key holds another
// type: retrying cannot help until the key is renamed or deleted.
var ErrNotAStream = errors.New("pginbox/redisstream: the key is not a stream")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Redis is the client to write through. Required.
	Redis redis.UniversalClient

	// Stream returns the stream a message is added to. Defaults to the
	// message's Destination.
	Stream func(outbox.Message) string

	// MaxLen, when positive, trims each stream to about that many entries
	// (XADD MAXLEN ~). Defaults to 0: no trimming. Trim no shorter than what
	// a consumer group may still have to read.
	MaxLen int64

	// AllowNotDurable lets NewPublisher start on a Redis that does not
	// persist writes (appendonly no), or whose configuration it cannot read
	// (CONFIG GET disabled). Defaults to false: such a Redis is refused with
	// ErrNotDurable, because an entry it acknowledged, and the relay marked
	// published, is gone after a Redis restart. Set it only for tests, or
	// when persistence is ensured another way (a replica with AOF, a managed
	// service that persists).
	AllowNotDurable bool
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	c.Stream = cfgerr.Destination(c.Stream)
	return c
}

func (c PublisherConfig) validate() error {
	return cfgerr.First("redisstream",
		redisbase.ClientCheck(c.Redis),
		cfgerr.If(c.MaxLen < 0, "PublisherConfig.MaxLen is %d, want 0 (no trimming) or more", c.MaxLen),
	)
}

// Publisher adds outbox events to Redis streams for an outbox.Relay, one
// XADD per event in one pipeline per batch, with the event ID in the
// DefaultIDField field. Redis does not deduplicate entries: an event
// published again (a relay crash between XADD and marking, a reply lost in
// a cut) is a second entry with the same ID, and the receiving inbox drops
// it as a Duplicate.
type Publisher struct {
	cfg PublisherConfig
	w   redisbase.Writer
}

// Close returns nil: the Redis client is PublisherConfig.Redis, the
// caller's to close. It is here so that every publisher is an io.Closer.
func (p *Publisher) Close() error { return nil }

// NewPublisher returns a Publisher. Unless AllowNotDurable is set, it
// checks that Redis persists what it acknowledges (see ErrNotDurable).
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg, w, err := redisbase.Start(cfg, PublisherConfig.withDefaults, PublisherConfig.validate, PublisherConfig.writer)
	if err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg, w: w}, nil
}

// writer is how a Publisher writes: XADD, a refusal of a key that is not a
// stream.
func (c PublisherConfig) writer() (redisbase.Writer, bool) {
	return redisbase.Writer{Redis: c.Redis, Pkg: "pginbox/redisstream", Op: "XADD", NotDurable: ErrNotDurable,
		WrongType: ErrNotAStream, Fix: "use another Stream name or delete the key"}, c.AllowNotDurable
}

// Publish adds msgs in one pipeline; see outbox.Publisher. It returns when
// ctx ends even if the client is still waiting for Redis; entries that
// pipeline adds later are copies the receiving inbox drops.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return p.w.Publish(ctx, msgs, p.add)
}

// add queues an event's XADD.
func (p *Publisher) add(ctx context.Context, pipe redis.Pipeliner, m outbox.Message) (redis.Cmder, error) {
	v := []any{
		DefaultIDField, m.ID.String(),
		FieldEventType, m.EventType,
		FieldSchemaVersion, strconv.Itoa(m.SchemaVersion),
		FieldSource, m.Source,
		FieldPayload, string(m.Payload),
	}
	if m.OrderingKey != "" {
		v = append(v, FieldOrderingKey, m.OrderingKey)
	}
	if len(m.Metadata) > 0 {
		md, err := json.Marshal(m.Metadata)
		if err != nil {
			return nil, handler.Permanent(fmt.Errorf("pginbox/redisstream: encoding the metadata: %w", err))
		}
		v = append(v, FieldMetadata, string(md))
	}
	a := &redis.XAddArgs{Stream: p.cfg.Stream(m), Values: v}
	if p.cfg.MaxLen > 0 {
		a.MaxLen, a.Approx = p.cfg.MaxLen, true
	}
	return pipe.XAdd(ctx, a), nil
}

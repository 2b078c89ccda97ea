package redisstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
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
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	if c.Stream == nil {
		c.Stream = func(m outbox.Message) string { return m.Destination }
	}
	return c
}

func (c PublisherConfig) validate() error {
	switch {
	case c.Redis == nil:
		return cfgerr.New("redisstream", "PublisherConfig.Redis is nil: pass a client, e.g. redis.NewClient(...)")
	case c.MaxLen < 0:
		return cfgerr.New("redisstream", "PublisherConfig.MaxLen is %d, want 0 (no trimming) or more", c.MaxLen)
	}
	return nil
}

// Publisher adds outbox events to Redis streams for an outbox.Relay, one
// XADD per event in one pipeline per batch, with the event ID in the
// DefaultIDField field. Redis does not deduplicate entries: an event
// published again (a relay crash between XADD and marking, a reply lost in
// a cut) is a second entry with the same ID, and the receiving inbox drops
// it as a Duplicate.
type Publisher struct {
	cfg PublisherConfig
}

// NewPublisher returns a Publisher.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg}, nil
}

// Publish adds msgs in one pipeline; see outbox.Publisher. It returns when
// ctx ends even if the client is still waiting for Redis (go-redis applies
// context deadlines to sockets only with ContextTimeoutEnabled); entries
// that pipeline adds later are copies the receiving inbox drops.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	done := make(chan []error, 1)
	go func() { done <- p.add(ctx, msgs) }()
	select {
	case errs := <-done:
		return errs
	case <-ctx.Done():
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = fmt.Errorf("pginbox/redisstream: no XADD reply before the publish timeout (the relay retries): %w", ctx.Err())
		}
		return errs
	}
}

// add runs the pipeline and returns nil or one error per message.
func (p *Publisher) add(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	cmds := make([]*redis.StringCmd, len(msgs))
	_, _ = p.cfg.Redis.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, m := range msgs {
			args, err := p.args(m)
			if err != nil {
				errs[i] = err
				continue
			}
			cmds[i] = pipe.XAdd(ctx, args)
		}
		return nil
	})
	failed := false
	for i, c := range cmds {
		if c != nil && c.Err() != nil {
			errs[i] = addError(c.Err())
		}
		failed = failed || errs[i] != nil
	}
	if !failed {
		return nil
	}
	return errs
}

// args maps an event to its XADD.
func (p *Publisher) args(m outbox.Message) (*redis.XAddArgs, error) {
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
	return a, nil
}

// addError maps a failed XADD: a key holding another type can never take
// the entry; anything else (connection, timeout, OOM) is retried.
func addError(err error) error {
	if strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return handler.Permanent(fmt.Errorf("%w: XADD: %w: use another Stream name or delete the key, then requeue the event", ErrNotAStream, err))
	}
	return fmt.Errorf("pginbox/redisstream: XADD (the relay retries): %w", err)
}

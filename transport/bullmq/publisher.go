package bullmq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/redisbase"
)

// EventData is the data of a job a Publisher adds: the event and its
// payload. A Node worker reads it as job.data; the job's name is the event
// type and its ID the event ID.
type EventData struct {
	EventID       string            `json:"eventId"`               // the outbox event's ID (also the job ID)
	EventType     string            `json:"eventType"`             // also the job's name
	SchemaVersion int               `json:"schemaVersion"`         // the payload's schema version
	Source        string            `json:"source"`                // the emitting service
	OrderingKey   string            `json:"orderingKey,omitempty"` // the event's ordering key, if any
	Metadata      map[string]string `json:"metadata,omitempty"`    // the event's metadata (trace context, ...)
	Payload       json.RawMessage   `json:"payload"`               // the event's JSON payload
}

// ErrWrongType is the error of a job whose queue keys hold values of other
// types: retrying cannot help until they are renamed or deleted.
var ErrWrongType = errors.New("pginbox/bullmq: a key of the queue holds another type")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Redis is the client to write through. Required.
	Redis redis.UniversalClient

	// Queue returns the BullMQ queue a message is added to. Defaults to the
	// message's Destination.
	Queue func(outbox.Message) string

	// Prefix is the queues' key prefix (BullMQ's prefix option). Defaults to
	// DefaultPrefix.
	Prefix string

	// JobOptions are the BullMQ job options every job gets (stored as the
	// job's opts, read by the Node worker), e.g. {"attempts": 3,
	// "removeOnComplete": 1000}. Options that place a job (delay, priority,
	// lifo, jobId, parent, repeat, deduplication) are refused: the
	// Publisher adds every job to wait with the event ID as its ID.
	// Defaults to {"attempts": 1}.
	JobOptions map[string]any

	// AllowNotDurable lets NewPublisher start on a Redis that does not
	// persist writes (appendonly no), or whose configuration it cannot read
	// (CONFIG GET disabled). Defaults to false: such a Redis is refused with
	// ErrNotDurable, because a job it acknowledged, and the relay marked
	// published, is gone after a Redis restart. Set it only for tests, or
	// when persistence is ensured another way.
	AllowNotDurable bool
}

// placing are the job options a Publisher does not honour.
var placing = []string{"delay", "priority", "lifo", "jobId", "parent", "repeat", "deduplication", "debounce"}

func (c PublisherConfig) withDefaults() PublisherConfig {
	c.Queue = cfgerr.Destination(c.Queue)
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	if c.JobOptions == nil {
		c.JobOptions = map[string]any{"attempts": 1}
	}
	return c
}

func (c PublisherConfig) validate() error {
	if err := cfgerr.First("bullmq", redisbase.ClientCheck(c.Redis)); err != nil {
		return err
	}
	for _, k := range placing {
		if _, ok := c.JobOptions[k]; ok {
			return cfgerr.New("bullmq", "PublisherConfig.JobOptions has %q: the Publisher adds every job to wait with the event ID as job ID; remove it", k)
		}
	}
	if _, err := json.Marshal(c.JobOptions); err != nil {
		return cfgerr.New("bullmq", "PublisherConfig.JobOptions is not JSON: %v", err)
	}
	return nil
}

// Publisher adds outbox events as BullMQ jobs for an outbox.Relay, one
// atomic script per job in one pipeline per batch. The job ID is the event
// ID: BullMQ keeps one job per ID, so an event published again (a relay
// crash between adding and marking, a reply lost in a cut) while its job
// exists is not added twice. After the job was removed (removeOnComplete)
// it would be; the receiving inbox then drops it as a Duplicate.
//
// BullMQ workers run jobs concurrently and retry them out of order, so the
// order of one ordering key holds only with a single worker of concurrency
// 1 and no retries.
type Publisher struct {
	cfg  PublisherConfig
	w    redisbase.Writer
	opts string // JobOptions as JSON
}

// Close returns nil: the Redis client is PublisherConfig.Redis, the
// caller's to close.
func (p *Publisher) Close() error { return nil }

// NewPublisher returns a Publisher. Unless AllowNotDurable is set, it
// checks that Redis persists what it acknowledges (see ErrNotDurable).
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg, w, err := redisbase.Start(cfg, PublisherConfig.withDefaults, PublisherConfig.validate, PublisherConfig.writer)
	if err != nil {
		return nil, err
	}
	opts, _ := json.Marshal(cfg.JobOptions)
	return &Publisher{cfg: cfg, w: w, opts: string(opts)}, nil
}

// writer is how a Publisher writes: the add script, a refusal of a queue
// whose keys hold other types.
func (c PublisherConfig) writer() (redisbase.Writer, bool) {
	return redisbase.Writer{Redis: c.Redis, Pkg: "pginbox/bullmq", Op: "adding the job", NotDurable: ErrNotDurable,
		WrongType: ErrWrongType, Fix: "use another queue name or delete the key"}, c.AllowNotDurable
}

// Publish adds msgs in one pipeline; see outbox.Publisher. It returns when
// ctx ends even if the client is still waiting for Redis; jobs that
// pipeline adds later are kept once by their ID.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return p.w.Publish(ctx, msgs, p.add)
}

// add queues the script that adds an event's job.
func (p *Publisher) add(ctx context.Context, pipe redis.Pipeliner, m outbox.Message) (redis.Cmder, error) {
	data, err := json.Marshal(EventData{
		EventID:       m.ID.String(),
		EventType:     m.EventType,
		SchemaVersion: m.SchemaVersion,
		Source:        m.Source,
		OrderingKey:   m.OrderingKey,
		Metadata:      m.Metadata,
		Payload:       m.Payload,
	})
	if err != nil {
		return nil, handler.Permanent(fmt.Errorf("pginbox/bullmq: encoding the job data: %w", err))
	}
	k := queueKeys(p.cfg.Prefix, p.cfg.Queue(m))
	// EVAL, not EVALSHA: a pipeline cannot fall back when Redis lost its
	// script cache (a restart).
	return addScript.Eval(ctx, pipe, []string{k.wait, k.paused, k.meta, k.events, k.marker},
		k.base, m.ID.String(), m.EventType, string(data), p.opts, nowMillis()), nil
}

package redisstream

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/redisbase"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultIDField       = "message_id"
	DefaultDeliveryLimit = 20
	DefaultClaimIdle     = 30 * time.Second
	DefaultBlock         = time.Second
	DefaultBatchSize     = 10
)

// Accepter is the part of *inbox.Client the consumer uses.
type Accepter interface {
	// Accept is (*inbox.Client).Accept.
	Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error)
}

// Config configures a Consumer.
type Config struct {
	// Redis is the client to read through, e.g. redis.NewClient(...). It
	// dials again by itself after a lost connection. Required.
	Redis redis.UniversalClient

	// Stream is the stream to consume. Required.
	Stream string

	// Group is the consumer group. Run creates it at the start of the stream
	// (so entries added before the first run are not skipped) when it does
	// not exist. Required.
	Group string

	// Consumer is this instance's name in the group. Defaults to
	// "<hostname>-<pid>".
	Consumer string

	// Scope is the tenant (or global scope) of every entry of the stream:
	// configuration decides it, never an entry. Required.
	Scope inbox.Scope

	// Decode maps an entry to the inbox message to accept. Required. The
	// message's Scope is overwritten with Scope; when it leaves MessageID
	// empty, the IDField field is used. An error from Decode dead-letters the
	// entry (reason "decode").
	Decode func(redis.XMessage) (inbox.Message, error)

	// IDField is the entry field holding the producer's message ID, used when
	// Decode leaves MessageID empty. Defaults to DefaultIDField.
	IDField string

	// DeadLetterStream receives rejected and exhausted entries: their fields
	// plus FieldReason, FieldError, FieldReceipt, FieldStream, FieldEntryID
	// and FieldDeliveries. In Redis Cluster it must hash to Stream's slot (use a
	// hash tag, e.g. "{orders}" and "{orders}:dead"): the dead letter and the
	// XACK are one MULTI. Required.
	DeadLetterStream string

	// DeliveryLimit is how many deliveries an entry gets before it is
	// dead-lettered. Retries are for storage failures, so DeliveryLimit
	// times ClaimIdle is about how long a database outage may last before
	// entries are dead-lettered. Defaults to DefaultDeliveryLimit.
	DeliveryLimit int64

	// ClaimIdle is how long an entry stays pending (not acknowledged) before
	// a Consumer claims it again: the retry delay, and how soon the entries
	// of a crashed Consumer move on. It must exceed the longest accept.
	// Defaults to DefaultClaimIdle.
	ClaimIdle time.Duration

	// Block is how long one XREADGROUP waits for new entries; Run notices a
	// cancelled context within it. Defaults to DefaultBlock.
	Block time.Duration

	// BatchSize is how many entries are read, and accepted concurrently, at
	// once. Defaults to DefaultBatchSize.
	BatchSize int64

	// Logger receives the consumer's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// OnError receives the errors Run keeps going after but someone must act
	// on: ErrGroupLost, once per loss. It is called from Run's goroutine;
	// keep it short. Optional: the error is also logged at Error level and
	// counted in Stats.
	OnError func(error)
}

func (c Config) validate() error {
	return cfgerr.First("redisstream",
		redisbase.Check(c.Redis, c.Scope, c.Decode != nil, "an entry", c.DeliveryLimit, c.Block),
		cfgerr.If(c.Stream == "", "Config.Stream is required: name the stream to consume"),
		cfgerr.If(c.Group == "", "Config.Group is required: name the consumer group"),
		cfgerr.If(c.DeadLetterStream == "", "Config.DeadLetterStream is required: name the stream for rejected entries"),
		cfgerr.If(c.DeadLetterStream == c.Stream, "Config.DeadLetterStream must differ from Stream"),
		cfgerr.If(c.ClaimIdle < 10*time.Millisecond, "Config.ClaimIdle is %v: it must be at least 10ms", c.ClaimIdle),
		cfgerr.AtLeast("Config.BatchSize", c.BatchSize, 1),
	)
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Consumer = cmp.Or(c.Consumer, redisbase.Worker())
	c.IDField = cmp.Or(c.IDField, DefaultIDField)
	c.DeliveryLimit = cmp.Or(c.DeliveryLimit, DefaultDeliveryLimit)
	c.ClaimIdle = cmp.Or(c.ClaimIdle, DefaultClaimIdle)
	c.Block = cmp.Or(c.Block, DefaultBlock)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	return c
}

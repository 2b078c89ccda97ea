package kafka

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultDeliveryLimit = 20
	DefaultMaxBatch      = 500
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = 30 * time.Second
	DefaultAcceptTimeout = 30 * time.Second
)

// Accepter is the part of *inbox.Client the consumer uses.
type Accepter interface {
	// AcceptBatch is (*inbox.Client).AcceptBatch.
	AcceptBatch(ctx context.Context, msgs []inbox.Message) ([]inbox.BatchItem, error)
}

// Config configures a Consumer.
type Config struct {
	// Brokers are seed addresses, host:port. Required.
	Brokers []string

	// Topics are consumed. Required.
	Topics []string

	// Group is the consumer group whose offsets are committed. Required.
	Group string

	// Scope is the tenant (or global scope) of every record: the topic's
	// configuration decides it, never a record. Required.
	Scope inbox.Scope

	// Decode maps a record to a message. Required. The message's Scope is
	// overwritten with Scope. An error dead-letters the record (reason
	// "decode"). Use the producer's stable event ID (a header, or the key) as
	// the message ID.
	Decode func(r *kgo.Record) (inbox.Message, error)

	// DeadLetterTopic receives rejected and exhausted records, with the
	// reason in headers. Required; it must exist (or the cluster must create
	// topics on first produce).
	DeadLetterTopic string

	// DeliveryLimit is how many failed accepts of its own a record gets
	// before it is dead-lettered (reason ReasonDeliveryLimit) and the
	// partition moves on. A batch that fails is accepted again one record at
	// a time, so only the record that fails alone is counted. Retries are for
	// storage failures, so DeliveryLimit times the retry delays is about how
	// long a database outage may last before records are dead-lettered.
	// Kafka keeps no delivery count: the Consumer counts, in memory, so a
	// restart of the consumer (or a rebalance that moves the partition)
	// starts the count again; that is safe, since the limit only bounds the
	// retries. Defaults to DefaultDeliveryLimit.
	DeliveryLimit int

	// MaxBatch is the most records taken per poll, and so the largest
	// AcceptBatch. Defaults to DefaultMaxBatch.
	MaxBatch int

	// RetryDelay is the pause before re-reading after a failed batch; it
	// doubles with each failure in a row up to MaxRetryDelay. Defaults to
	// DefaultRetryDelay and DefaultMaxRetryDelay.
	RetryDelay, MaxRetryDelay time.Duration

	// AcceptTimeout bounds one AcceptBatch and one dead-letter produce.
	// Keep it well below the group's rebalance timeout (default 60s).
	// Defaults to DefaultAcceptTimeout.
	AcceptTimeout time.Duration

	// ClientOptions are added to the franz-go client's options: TLS, SASL,
	// session timeout and so on. The consumer sets the seeds, group, topics,
	// manual commits and the rebalance callbacks itself.
	ClientOptions []kgo.Opt

	// Logger receives retries, dead letters and commit failures. Defaults to
	// slog.Default().
	Logger *slog.Logger

	// OnError receives the errors Run keeps going after but someone must act
	// on: ErrTopicLost, once per loss. It is called from Run's goroutine;
	// keep it short. Optional: the error is also logged at Error level and
	// counted in Stats.
	OnError func(error)
}

func (c Config) validate() error {
	return cfgerr.First("kafka",
		cfgerr.If(len(c.Brokers) == 0, "Config.Brokers is empty: list at least one host:port"),
		cfgerr.If(len(c.Topics) == 0, "Config.Topics is empty"),
		cfgerr.If(c.Group == "", "Config.Group is empty: offsets are committed for a consumer group"),
		cfgerr.Scope("Config.Scope", c.Scope),
		cfgerr.If(c.Decode == nil, "Config.Decode is nil: say how a record becomes an inbox.Message"),
		cfgerr.If(c.DeadLetterTopic == "", "Config.DeadLetterTopic is empty: name a topic for rejected records"),
		cfgerr.If(slices.Contains(c.Topics, c.DeadLetterTopic), "Config.DeadLetterTopic %q is also in Config.Topics: a rejected record would come back", c.DeadLetterTopic),
		cfgerr.AtLeast("Config.DeliveryLimit", c.DeliveryLimit, 1),
		cfgerr.AtLeast("Config.MaxBatch", c.MaxBatch, 1),
		cfgerr.Delays(c.RetryDelay, c.MaxRetryDelay),
		cfgerr.NotNegative("Config.AcceptTimeout", c.AcceptTimeout),
	)
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.DeliveryLimit = cmp.Or(c.DeliveryLimit, DefaultDeliveryLimit)
	c.MaxBatch = cmp.Or(c.MaxBatch, DefaultMaxBatch)
	c.RetryDelay, c.MaxRetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay), cmp.Or(c.MaxRetryDelay, DefaultMaxRetryDelay)
	c.AcceptTimeout = cmp.Or(c.AcceptTimeout, DefaultAcceptTimeout)
	return c
}

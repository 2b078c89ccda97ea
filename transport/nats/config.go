package nats

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultDeliveryLimit = 20
	DefaultAckWait       = 30 * time.Second
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = time.Minute
	DefaultConcurrency   = 10
)

// Accepter is the part of *inbox.Client the consumer uses.
type Accepter interface {
	// Accept is (*inbox.Client).Accept.
	Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error)
}

// Config configures a Consumer.
type Config struct {
	// URL is the NATS server (or a comma-separated list), e.g.
	// nats://127.0.0.1:4222. Required.
	URL string

	// ConnectOptions are added to the connection's options: credentials,
	// TLS, ReconnectWait and so on. The Consumer always reconnects forever
	// (MaxReconnects(-1), RetryOnFailedConnect), so that it outlives broker
	// outages.
	ConnectOptions []nats.Option

	// Stream is the JetStream stream to consume. It must exist. Required.
	Stream string

	// Durable names the durable pull consumer. The Consumer creates it, or
	// updates it to this configuration (explicit acks, DeliveryLimit, AckWait,
	// FilterSubjects), so the same name must not be shared with other
	// software. Required.
	Durable string

	// FilterSubjects restricts the consumer to these subjects. Empty consumes
	// the whole stream.
	FilterSubjects []string

	// Scope is the tenant (or global scope) of every message of the stream:
	// configuration decides it, never a message. Required.
	Scope inbox.Scope

	// Decode maps a message to the inbox message to accept. Required. The
	// message's Scope is overwritten with Scope; when it leaves MessageID
	// empty, the Nats-Msg-Id header is used. An error from Decode
	// dead-letters the message (reason "decode").
	Decode func(jetstream.Msg) (inbox.Message, error)

	// DeadLetterSubject receives rejected and exhausted messages, with the
	// reason in headers (HeaderReason, HeaderError, ...). A stream must capture
	// it: the Consumer publishes with JetStream and terminates a message only
	// after the dead letter is stored. Required.
	DeadLetterSubject string

	// DeliveryLimit is how many times the server delivers a message that is
	// not accepted before it gives up and the message is dead-lettered.
	// Retries are for storage failures, so DeliveryLimit with the retry delays
	// is how long a database outage may last before messages are
	// dead-lettered. Defaults to DefaultDeliveryLimit.
	DeliveryLimit int

	// AckWait is how long the server waits for an acknowledgement before it
	// redelivers. An accept gets half of it. Defaults to DefaultAckWait.
	AckWait time.Duration

	// RetryDelay is the NakWithDelay delay after a message's first delivery;
	// it doubles with every further delivery up to MaxRetryDelay. Defaults
	// to DefaultRetryDelay.
	RetryDelay time.Duration

	// MaxRetryDelay caps the retry delay. Defaults to DefaultMaxRetryDelay.
	MaxRetryDelay time.Duration

	// Concurrency is how many messages are accepted at once. Defaults to
	// DefaultConcurrency.
	Concurrency int

	// Logger receives the consumer's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// OnError receives the errors Run keeps going after but someone must act
	// on: ErrStreamLost, once per loss. It is called from Run's goroutine;
	// keep it short. Optional: the error is also logged at Error level and
	// counted in Stats.
	OnError func(error)
}

func (c Config) validate() error {
	return cfgerr.First("nats",
		cfgerr.If(c.URL == "", "Config.URL is required, e.g. nats://127.0.0.1:4222"),
		cfgerr.Scope("Config.Scope", c.Scope),
		cfgerr.If(c.Stream == "", "Config.Stream is required: name the JetStream stream to consume"),
		cfgerr.If(c.Durable == "", "Config.Durable is required: name the durable consumer"),
		cfgerr.If(c.Decode == nil, "Config.Decode is required: map a message to an inbox.Message"),
		cfgerr.If(c.DeadLetterSubject == "", "Config.DeadLetterSubject is required: name a subject a stream captures"),
		cfgerr.If(c.DeliveryLimit < 2, "Config.DeliveryLimit is %d: it must be at least 2 so that a retry is possible", c.DeliveryLimit),
		cfgerr.If(c.AckWait < time.Second, "Config.AckWait is %v: it must be at least 1s", c.AckWait),
		cfgerr.NotNegative("Config.RetryDelay", c.RetryDelay),
		cfgerr.If(c.MaxRetryDelay < c.RetryDelay, "Config.MaxRetryDelay (%v) is below RetryDelay (%v)", c.MaxRetryDelay, c.RetryDelay),
		cfgerr.AtLeast("Config.Concurrency", c.Concurrency, 1),
	)
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.DeliveryLimit = cmp.Or(c.DeliveryLimit, DefaultDeliveryLimit)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.RetryDelay, c.MaxRetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay), cmp.Or(c.MaxRetryDelay, DefaultMaxRetryDelay)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	return c
}

// retryDelay is the NakWithDelay delay after a message's delivered-th
// delivery.
func (c Config) retryDelay(delivered uint64) time.Duration {
	return inbox.ExponentialBackoff(c.RetryDelay, 2, c.MaxRetryDelay, 0)(int(min(delivered, 64)))
}

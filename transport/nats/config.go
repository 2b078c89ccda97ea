package nats

import (
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

func (c Config) withDefaults() Config {
	if c.DeliveryLimit == 0 {
		c.DeliveryLimit = DefaultDeliveryLimit
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.MaxRetryDelay == 0 {
		c.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.URL == "":
		return cfgerr.New("nats", "Config.URL is required, e.g. nats://127.0.0.1:4222")
	case c.Scope.Kind != inbox.ScopeTenant && c.Scope.Kind != inbox.ScopeGlobal:
		return cfgerr.New("nats", "Config.Scope is unset: use inbox.Tenant(id) or inbox.Global()")
	case c.Stream == "":
		return cfgerr.New("nats", "Config.Stream is required: name the JetStream stream to consume")
	case c.Durable == "":
		return cfgerr.New("nats", "Config.Durable is required: name the durable consumer")
	case c.Decode == nil:
		return cfgerr.New("nats", "Config.Decode is required: map a message to an inbox.Message")
	case c.DeadLetterSubject == "":
		return cfgerr.New("nats", "Config.DeadLetterSubject is required: name a subject a stream captures")
	case c.DeliveryLimit < 2:
		return cfgerr.New("nats", "Config.DeliveryLimit is %d: it must be at least 2 so that a retry is possible", c.DeliveryLimit)
	case c.AckWait < time.Second:
		return cfgerr.New("nats", "Config.AckWait is %v: it must be at least 1s", c.AckWait)
	case c.RetryDelay < 0:
		return cfgerr.New("nats", "Config.RetryDelay is %v: it must not be negative", c.RetryDelay)
	case c.MaxRetryDelay < c.RetryDelay:
		return cfgerr.New("nats", "Config.MaxRetryDelay (%v) is below RetryDelay (%v)", c.MaxRetryDelay, c.RetryDelay)
	case c.Concurrency < 1:
		return cfgerr.New("nats", "Config.Concurrency is %d: it must be at least 1", c.Concurrency)
	}
	return nil
}

// retryDelay is the NakWithDelay delay after a message's delivered-th
// delivery.
func (c Config) retryDelay(delivered uint64) time.Duration {
	return inbox.ExponentialBackoff(c.RetryDelay, 2, c.MaxRetryDelay, 0)(int(min(delivered, 64)))
}

package rabbitmq

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultConcurrency   = 8
	DefaultDeliveryLimit = 10
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = 30 * time.Second
	DefaultAcceptTimeout = 30 * time.Second
)

// Accepter is the part of *inbox.Client the consumer uses.
type Accepter interface {
	// Accept is (*inbox.Client).Accept.
	Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error)
}

// Config configures a Consumer.
type Config struct {
	// URL is the broker, e.g. amqp://guest:guest@127.0.0.1:5672/. Required.
	URL string

	// Queue is consumed. Required. Use a quorum queue so that retries are
	// bounded (see DeliveryLimit).
	Queue string

	// Scope is the tenant (or global scope) of every message of Queue: the
	// queue's configuration decides it, never a message. Required.
	Scope inbox.Scope

	// Decode maps a delivery to a message. Required. The message's Scope is
	// overwritten with Scope. An error dead-letters the delivery (reason
	// "decode"). Use the producer's stable event ID (d.MessageId) as the
	// message ID.
	Decode func(d amqp.Delivery) (inbox.Message, error)

	// DeadLetterExchange receives rejected deliveries. Required; bind a queue
	// to it, or dead letters are refused and stay in Queue.
	DeadLetterExchange string

	// DeadLetterRoutingKey is the routing key of dead letters. Defaults to the
	// delivery's own routing key.
	DeadLetterRoutingKey string

	// Concurrency is how many deliveries are accepted at once. Defaults to
	// DefaultConcurrency.
	Concurrency int

	// Prefetch is the channel's basic.qos count: the unacked deliveries the
	// broker may push. Defaults to 2 x Concurrency, so every accept has the
	// next delivery waiting; more only holds messages back from other
	// consumers and lengthens redelivery after a crash.
	Prefetch int

	// DeliveryLimit is the most deliveries a message gets while Accept asks
	// to retry; the last one is dead-lettered (reason "delivery_limit")
	// instead of requeued. Counted from the quorum queue's x-delivery-count
	// header. Defaults to DefaultDeliveryLimit.
	DeliveryLimit int

	// RetryDelay is how long a delivery is held before its first nack; it
	// doubles with each redelivery up to MaxRetryDelay. Holding it keeps the
	// broker from spinning the message against a database that is down.
	// Defaults to DefaultRetryDelay and DefaultMaxRetryDelay.
	RetryDelay, MaxRetryDelay time.Duration

	// AcceptTimeout bounds one Accept. Defaults to DefaultAcceptTimeout.
	AcceptTimeout time.Duration

	// Setup runs on a fresh channel after every (re)connect, before
	// consuming: declare the queue, exchanges and bindings here. Optional.
	Setup func(ch *amqp.Channel) error

	// Logger receives connection changes (Info/Warn), retries and dead
	// letters. Defaults to slog.Default().
	Logger *slog.Logger

	// OnError receives the errors Run keeps going after but someone must act
	// on: ErrQueueLost, once per loss. It is called from Run's goroutine;
	// keep it short. Optional: the error is also logged at Error level and
	// counted in Stats.
	OnError func(error)
}

func (c Config) validate() error {
	_, urlErr := amqp.ParseURI(c.URL)
	return cfgerr.First("rabbitmq",
		cfgerr.If(c.URL == "", "Config.URL is empty: set it to amqp://user:password@host:5672/vhost"),
		cfgerr.If(urlErr != nil, "Config.URL: %v", urlErr),
		cfgerr.If(c.Queue == "", "Config.Queue is empty"),
		cfgerr.Scope("Config.Scope", c.Scope),
		cfgerr.If(c.Decode == nil, "Config.Decode is nil: say how a delivery becomes an inbox.Message"),
		cfgerr.If(c.DeadLetterExchange == "", "Config.DeadLetterExchange is empty: name an exchange with a queue bound to it for rejected messages"),
		cfgerr.AtLeast("Config.Concurrency", c.Concurrency, 1),
		cfgerr.If(c.Prefetch < c.Concurrency, "Config.Prefetch is %d, want at least Concurrency (%d)", c.Prefetch, c.Concurrency),
		cfgerr.AtLeast("Config.DeliveryLimit", c.DeliveryLimit, 1),
		cfgerr.Delays(c.RetryDelay, c.MaxRetryDelay),
		cfgerr.NotNegative("Config.AcceptTimeout", c.AcceptTimeout),
	)
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Prefetch = cmp.Or(c.Prefetch, 2*c.Concurrency)
	c.DeliveryLimit = cmp.Or(c.DeliveryLimit, DefaultDeliveryLimit)
	c.RetryDelay, c.MaxRetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay), cmp.Or(c.MaxRetryDelay, DefaultMaxRetryDelay)
	c.AcceptTimeout = cmp.Or(c.AcceptTimeout, DefaultAcceptTimeout)
	return c
}

package rabbitmq

import (
	"cmp"
	"errors"
	"log/slog"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// DefaultMaxMessageSize is RabbitMQ's own default max_message_size (128 MiB).
const DefaultMaxMessageSize = 128 << 20

// Headers the Publisher sets, besides the message-id (the event ID), type
// (the event type), app-id (the source), timestamp (when it was emitted) and
// correlation-id (the metadata's correlation_id) properties.
const (
	HeaderSchemaVersion = "x-pginbox-schema-version" // int32
	HeaderSource        = "x-pginbox-source"
	HeaderOrderingKey   = "x-pginbox-ordering-key" // absent when the event has none
	HeaderMetadata      = "x-pginbox-metadata"     // a table of strings; absent when empty
)

// ErrUnroutable is the error of a message the broker returned because no
// queue is bound for it (it was published mandatory).
var ErrUnroutable = errors.New("pginbox/rabbitmq: the broker routed the message to no queue")

// ErrNacked is the error of a message the broker refused to confirm.
var ErrNacked = errors.New("pginbox/rabbitmq: the broker nacked the message")

// ErrTooLarge is the error of a message larger than
// PublisherConfig.MaxMessageSize.
var ErrTooLarge = errors.New("pginbox/rabbitmq: message too large")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// URL is the broker, e.g. amqp://guest:guest@127.0.0.1:5672/. Required.
	URL string

	// Exchange returns the exchange a message is published to. Defaults to
	// the default exchange (""), which routes by queue name.
	Exchange func(outbox.Message) string

	// RoutingKey returns the routing key. Defaults to the message's
	// Destination (with the default exchange: the queue's name).
	RoutingKey func(outbox.Message) string

	// UnroutablePermanent makes a message the broker routed to no queue go
	// DEAD at once (handler.Permanent). Defaults to false: it is retried, so
	// a queue bound late still gets it. Every message is published mandatory;
	// none is dropped silently either way.
	UnroutablePermanent bool

	// MaxMessageSize is the largest body published; a larger one goes DEAD
	// at once, since the broker would refuse it on every retry. Match the
	// broker's max_message_size. Defaults to DefaultMaxMessageSize.
	MaxMessageSize int

	// Setup runs on the publishing channel after every (re)connect: declare
	// exchanges and queues here. Optional.
	Setup func(ch *amqp.Channel) error

	// AllowNotDurable lets the Publisher publish to a transient queue. Defaults
	// to false: before the first publish to a queue (through the default
	// exchange, where the routing key is the queue) the Publisher checks that
	// the queue is durable and refuses a transient one with ErrNotDurable.
	AllowNotDurable bool

	// Logger receives reconnects. Defaults to slog.Default().
	Logger *slog.Logger
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	if c.Exchange == nil {
		c.Exchange = func(outbox.Message) string { return "" }
	}
	c.RoutingKey = cfgerr.Destination(c.RoutingKey)
	c.MaxMessageSize = cmp.Or(c.MaxMessageSize, DefaultMaxMessageSize)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

func (c PublisherConfig) validate() error {
	_, urlErr := amqp.ParseURI(c.URL)
	return cfgerr.First("rabbitmq",
		cfgerr.If(c.URL == "", "PublisherConfig.URL is empty: set it to amqp://user:password@host:5672/vhost"),
		cfgerr.If(urlErr != nil, "PublisherConfig.URL: %v", urlErr),
		cfgerr.If(c.MaxMessageSize < 0, "PublisherConfig.MaxMessageSize is %d, want a positive size (0 means %d)", c.MaxMessageSize, DefaultMaxMessageSize),
	)
}

package sqs

import (
	"cmp"
	"errors"
	"strings"

	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// DefaultMaxMessageBytes is Amazon SQS's message size limit (1 MiB), body
// and attributes together.
const DefaultMaxMessageBytes = 1 << 20

// ErrPublishRejected is the error of a message that can never be sent
// (larger than MaxMessageBytes, or refused by the server as invalid):
// retrying the same message cannot help.
var ErrPublishRejected = errors.New("pginbox/sqs: message rejected")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Client talks to the queue server: an *sqs.Client. Required.
	Client SendAPI

	// QueueURL returns the URL of the queue a message is sent to. Defaults
	// to the message's Destination (emit events with the queue URL as their
	// destination). A URL ending in ".fifo" is a FIFO queue: its messages
	// get MessageGroupId = the ordering key (the event ID for events without
	// one, which are then not ordered) and MessageDeduplicationId = the
	// event ID.
	QueueURL func(outbox.Message) string

	// MaxMessageBytes refuses larger messages (payload plus attributes)
	// before sending, as permanent failures. Defaults to
	// DefaultMaxMessageBytes; lower it to your queues' MaximumMessageSize.
	MaxMessageBytes int
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	c.QueueURL = cfgerr.Destination(c.QueueURL)
	c.MaxMessageBytes = cmp.Or(c.MaxMessageBytes, DefaultMaxMessageBytes)
	return c
}

func (c PublisherConfig) validate() error {
	return cfgerr.First("sqs",
		cfgerr.If(c.Client == nil, "PublisherConfig.Client is required: pass sqs.NewFromConfig(cfg)"),
		cfgerr.If(c.MaxMessageBytes < 1, "PublisherConfig.MaxMessageBytes is %d: it must be positive", c.MaxMessageBytes),
	)
}

// isFIFO says whether url names a FIFO queue (SQS requires the suffix).
func isFIFO(url string) bool { return strings.HasSuffix(url, ".fifo") }

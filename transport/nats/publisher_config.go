package nats

import (
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Headers the Publisher sets besides Nats-Msg-Id (the event ID).
const (
	HeaderEventType     = "Pginbox-Event-Type"
	HeaderSchemaVersion = "Pginbox-Schema-Version" // decimal
	HeaderSource        = "Pginbox-Source"
	HeaderOrderingKey   = "Pginbox-Ordering-Key" // absent when the event has none
	// HeaderMetadataPrefix prefixes one header per metadata entry.
	HeaderMetadataPrefix = "Pginbox-Md-"
)

// ErrPublishRejected is the error of a message the client or server refused
// for good (larger than the server's max_payload or the stream's
// max_msg_size): retrying the same message cannot help.
var ErrPublishRejected = errors.New("pginbox/nats: message rejected")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// URL is the NATS server (or a comma-separated list), e.g.
	// nats://127.0.0.1:4222. Required.
	URL string

	// ConnectOptions are added to the connection's options: credentials,
	// TLS, a name; optional. The Publisher reconnects forever on its own.
	ConnectOptions []nats.Option

	// Subject returns the subject a message is published to; a stream must
	// capture it. Defaults to the message's Destination.
	Subject func(outbox.Message) string

	// AllowNotDurable lets the Publisher publish to a stream that keeps
	// messages in memory (storage: memory). Defaults to false: before the
	// first publish to a subject the Publisher looks up the stream that
	// captures it and refuses a memory stream with ErrNotDurable, because a
	// message it acknowledged, and the relay marked published, is gone when
	// the server restarts.
	AllowNotDurable bool
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	c.Subject = cfgerr.Destination(c.Subject)
	return c
}

func (c PublisherConfig) validate() error {
	if c.URL == "" {
		return cfgerr.New("nats", "PublisherConfig.URL is empty: set it to nats://host:4222")
	}
	return nil
}

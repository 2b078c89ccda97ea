package mqtt

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"

	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// User properties the Publisher sets besides DefaultIDProperty (the event
// ID), and the content type application/json.
const (
	PropertyEventType     = "pginbox-event-type"
	PropertySchemaVersion = "pginbox-schema-version" // decimal
	PropertySource        = "pginbox-source"
	PropertyOrderingKey   = "pginbox-ordering-key" // absent when the event has none
	// PropertyMetadataPrefix prefixes one user property per metadata entry
	// (pginbox-md-traceparent, pginbox-md-correlation_id, ...).
	PropertyMetadataPrefix = "pginbox-md-"
)

// ErrNoSubscribers is the error of a message the broker acknowledged with
// "no matching subscribers" (PUBACK 0x10): it accepted the message and
// dropped it, since no session subscribes to its topic.
var ErrNoSubscribers = errors.New("pginbox/mqtt: no subscription matches the topic, so the broker dropped the message")

// ErrRejected is the error of a message the broker refused (a PUBACK reason
// code of 0x80 or above), or one the Publisher refuses to send because the
// broker would (an invalid topic, a packet above the broker's maximum).
var ErrRejected = errors.New("pginbox/mqtt: message rejected")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// ServerURL is the broker, e.g. mqtt://127.0.0.1:1883. Required.
	ServerURL string

	// ClientID names the Publisher's connection at the broker; it must be
	// unique among the broker's clients (a second connection with the same
	// ID takes the first one's place). The Publisher starts clean and keeps
	// no session, so it need not be stable. Defaults to
	// "pginbox-relay-" and a random suffix.
	ClientID string

	// Topic returns the topic a message is published to. Defaults to the
	// message's Destination.
	Topic func(outbox.Message) string

	// AllowNoSubscribers counts a message the broker dropped for want of a
	// subscriber (PUBACK 0x10, "no matching subscribers") as delivered.
	// Defaults to false: it fails with ErrNoSubscribers and is retried, so
	// an event is not marked published while nobody can receive it. Set it
	// for topics where nobody listening is fine.
	AllowNoSubscribers bool

	// Username and Password authenticate the connection, when set.
	Username string
	Password []byte

	// Logger receives reconnects. Defaults to slog.Default().
	Logger *slog.Logger
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	if c.ClientID == "" {
		c.ClientID = "pginbox-relay-" + randomSuffix()
	}
	c.Topic = cfgerr.Destination(c.Topic)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

func (c PublisherConfig) validate() error {
	return cfgerr.First("mqtt", serverCheck("PublisherConfig.ServerURL", c.ServerURL))
}

// randomSuffix is 12 hex digits.
func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

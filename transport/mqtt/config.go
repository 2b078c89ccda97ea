package mqtt

import (
	"cmp"
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultDeliveryLimit = 120 // with DefaultRetryDelay, about ten minutes of database outage
	DefaultIDProperty    = "message-id"
	DefaultSessionExpiry = time.Hour
	DefaultRetryDelay    = 5 * time.Second
	DefaultAcceptTimeout = 30 * time.Second
)

// Accepter is the part of *inbox.Client the consumer uses.
type Accepter interface {
	// Accept is (*inbox.Client).Accept.
	Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error)
}

// Config configures a Consumer.
type Config struct {
	// ServerURL is the broker, e.g. mqtt://127.0.0.1:1883. Required.
	ServerURL string

	// ClientID names the session at the broker. It must be stable across
	// restarts and unique among the broker's clients: the broker keeps the
	// unacknowledged messages in this session. Required.
	ClientID string

	// Topics are the topic filters to subscribe to, at QoS 1. Required.
	Topics []string

	// Scope is the tenant (or global scope) of every message of Topics:
	// configuration decides it, never a message. Required.
	Scope inbox.Scope

	// Decode maps a message to the inbox message to accept. Required. The
	// message's Scope is overwritten with Scope; when it leaves MessageID
	// empty, the IDProperty user property is used. An error from Decode
	// dead-letters the message (reason "decode").
	Decode func(*paho.Publish) (inbox.Message, error)

	// IDProperty is the user property holding the producer's message ID, used
	// when Decode leaves MessageID empty. Defaults to DefaultIDProperty.
	IDProperty string

	// DeadLetterTopic receives rejected and exhausted messages (QoS 1), with
	// the reason in user properties. A broker drops messages nobody
	// subscribes to, so keep a persistent session subscribed to it; while
	// none is, the Consumer does not acknowledge rejected messages. Required.
	DeadLetterTopic string

	// DeliveryLimit is how many failed accepts a message gets before it is
	// dead-lettered (reason ReasonDeliveryLimit) and acknowledged, so that
	// the messages after it move on. Retries are for storage failures, so
	// DeliveryLimit times RetryDelay is about how long a database outage may
	// last before messages are dead-lettered. MQTT keeps no delivery count:
	// the Consumer counts, in memory, by topic and message ID, so a restart
	// of the consumer starts the count again; that is safe, since the limit
	// only bounds the retries. Defaults to DefaultDeliveryLimit.
	DeliveryLimit int

	// SessionExpiry is how long the broker keeps the session, and the
	// messages for it, while the Consumer is disconnected. Defaults to
	// DefaultSessionExpiry.
	SessionExpiry time.Duration

	// RetryDelay is how long after a failed accept the Consumer reconnects
	// to have the unacknowledged messages redelivered. Defaults to
	// DefaultRetryDelay.
	RetryDelay time.Duration

	// AcceptTimeout bounds one accept. Defaults to DefaultAcceptTimeout.
	AcceptTimeout time.Duration

	// Username and Password authenticate the connection, when set.
	Username string
	Password []byte

	// Logger receives the consumer's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// OnError receives the errors Run keeps going after but someone must act
	// on: ErrSessionLost, once per loss. It is called from paho's goroutine;
	// keep it short. Optional: the error is also logged at Error level and
	// counted in Stats.
	OnError func(error)
}

func (c Config) validate() error {
	return cfgerr.First("mqtt",
		serverCheck("Config.ServerURL", c.ServerURL),
		cfgerr.Scope("Config.Scope", c.Scope),
		cfgerr.If(c.ClientID == "", "Config.ClientID is required: a stable name for the broker session"),
		cfgerr.If(len(c.Topics) == 0, "Config.Topics is required: the topic filters to subscribe to"),
		cfgerr.If(c.Decode == nil, "Config.Decode is required: map a message to an inbox.Message"),
		cfgerr.If(c.DeadLetterTopic == "", "Config.DeadLetterTopic is required: the topic for rejected messages"),
		cfgerr.AtLeast("Config.DeliveryLimit", c.DeliveryLimit, 1),
		cfgerr.If(c.SessionExpiry < time.Second, "Config.SessionExpiry is %v: it must be at least 1s, or the broker forgets unacknowledged messages on every reconnect", c.SessionExpiry),
		cfgerr.NotNegative("Config.RetryDelay", c.RetryDelay),
		cfgerr.NotNegative("Config.AcceptTimeout", c.AcceptTimeout),
	)
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.IDProperty = cmp.Or(c.IDProperty, DefaultIDProperty)
	c.DeliveryLimit = cmp.Or(c.DeliveryLimit, DefaultDeliveryLimit)
	c.SessionExpiry = cmp.Or(c.SessionExpiry, DefaultSessionExpiry)
	c.RetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay)
	c.AcceptTimeout = cmp.Or(c.AcceptTimeout, DefaultAcceptTimeout)
	return c
}

// serverCheck refuses a broker URL that is not mqtt://host:port (or tcp://).
func serverCheck(field, server string) cfgerr.Check {
	u, err := url.Parse(server)
	return cfgerr.All(
		cfgerr.If(server == "", "%s is required, e.g. mqtt://127.0.0.1:1883", field),
		cfgerr.If(err != nil, "%s: %v", field, err),
		cfgerr.If(err == nil && (u.Scheme != "mqtt" && u.Scheme != "tcp" || u.Port() == ""), "%s %q: want mqtt://host:port", field, server),
	)
}

// serverURL is a URL serverCheck accepted.
func serverURL(server string) *url.URL {
	u, _ := url.Parse(server)
	return u
}

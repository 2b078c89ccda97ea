package inbox

import (
	"log/slog"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultMaxAttempts     = 10
	DefaultMaxPayloadDepth = 64
	DefaultMaxPayloadBytes = 1 << 20 // 1 MiB of canonical JSON
)

// Config configures a Client.
type Config struct {
	// Consumers, when set, is the complete list of consumers this deployment
	// accepts for. Accept rejects any other consumer with a validation error, so a
	// typo cannot create a backlog nobody owns. Empty accepts any consumer.
	Consumers []string

	// MaxAttempts is the retry budget stored with each new receipt: after this many
	// failed attempts it becomes DEAD. Defaults to DefaultMaxAttempts.
	MaxAttempts int

	// MaxPayloadDepth is the deepest nesting of arrays and objects a payload may
	// have. Defaults to DefaultMaxPayloadDepth.
	MaxPayloadDepth int

	// MaxPayloadBytes bounds the size of a payload's canonical JSON. Defaults to
	// DefaultMaxPayloadBytes.
	MaxPayloadBytes int

	// Logger receives the client's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxPayloadDepth <= 0 {
		c.MaxPayloadDepth = DefaultMaxPayloadDepth
	}
	if c.MaxPayloadBytes <= 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

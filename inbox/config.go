package inbox

import (
	"log/slog"
	"time"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultMaxAttempts     = 10
	DefaultMaxPayloadDepth = 64
	DefaultMaxPayloadBytes = 1 << 20 // 1 MiB of canonical JSON

	DefaultGroupCommitMaxBatch = 100
	DefaultGroupCommitFlushers = 1
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

	// GroupCommit makes concurrent Accept calls share transactions: each call
	// waits while a flusher sends the calls queued so far as one batch insert
	// (one commit), then gets its own result, exactly as without group commit.
	// If the batch's commit outcome is unknown, every call in it gets
	// ErrCommitUncertain. It raises throughput when many goroutines accept at
	// once; a lone call is sent at once. AcceptTx and AcceptBatch are unaffected.
	GroupCommit bool

	// GroupCommitMaxBatch is the most calls one group commit carries. Defaults
	// to DefaultGroupCommitMaxBatch.
	GroupCommitMaxBatch int

	// GroupCommitMaxWait is how long a flusher waits for a batch to fill before
	// sending fewer than GroupCommitMaxBatch calls. Zero (the default) never
	// waits: batches then grow only while earlier ones are being committed.
	GroupCommitMaxWait time.Duration

	// GroupCommitFlushers is how many group commits may be in flight at once,
	// each on its own pool connection. Defaults to DefaultGroupCommitFlushers
	// (1): PostgreSQL serializes the commits of transactions that NOTIFY, so a
	// second flush against a nearby server mostly waits. Raise it when network
	// round trips to the server, not commits, are what calls wait for.
	GroupCommitFlushers int
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
	if c.GroupCommitMaxBatch <= 0 {
		c.GroupCommitMaxBatch = DefaultGroupCommitMaxBatch
	}
	if c.GroupCommitFlushers <= 0 {
		c.GroupCommitFlushers = DefaultGroupCommitFlushers
	}
	return c
}

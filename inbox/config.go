package inbox

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/pginbox/pginbox/internal/metadata"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultMaxAttempts     = 10
	DefaultMaxPayloadDepth = 64
	DefaultMaxPayloadBytes = 1 << 20 // 1 MiB of canonical JSON
	// DefaultMaxMetadataBytes is 64 KiB of stored metadata: room for trace
	// context, W3C baggage (at most 8 KiB) and IDs.
	DefaultMaxMetadataBytes = metadata.DefaultMaxBytes

	DefaultGroupCommitMaxBatch = 100
	DefaultGroupCommitFlushers = 1
)

// Limits of Config fields.
const (
	// MaxMaxAttempts is the largest retry budget (it is stored as an integer
	// column).
	MaxMaxAttempts = math.MaxInt32
	// MaxPayloadDepthLimit is the deepest nesting MaxPayloadDepth may allow.
	MaxPayloadDepthLimit = 10_000
	// MaxPayloadBytesLimit is the largest MaxPayloadBytes: 256 MiB, far below
	// PostgreSQL's 1 GB field limit.
	MaxPayloadBytesLimit = 256 << 20
	// MaxMetadataBytesLimit is the largest MaxMetadataBytes: 2^28 - 1 bytes,
	// the largest object PostgreSQL's jsonb holds.
	MaxMetadataBytesLimit = metadata.MaxBytesLimit
)

// Config configures a Client. Zero values mean the documented defaults;
// NewClient rejects negative and out-of-range values with a *ConfigError.
type Config struct {
	// Consumers, when set, is the complete list of consumers this deployment
	// accepts for. Accept rejects any other consumer with a validation error, so a
	// typo cannot create a backlog nobody owns. Each name follows the identity
	// string rules. Empty accepts any consumer.
	Consumers []string

	// MaxAttempts is the retry budget stored with each new receipt: after this many
	// failed attempts it becomes DEAD. Defaults to DefaultMaxAttempts; at most
	// MaxMaxAttempts.
	MaxAttempts int

	// MaxPayloadDepth is the deepest nesting of arrays and objects a payload may
	// have. Defaults to DefaultMaxPayloadDepth; at most MaxPayloadDepthLimit.
	MaxPayloadDepth int

	// MaxPayloadBytes bounds the size of a payload's canonical JSON, counting
	// each number at the length PostgreSQL would print it in plain decimal.
	// Defaults to DefaultMaxPayloadBytes; at most MaxPayloadBytesLimit.
	MaxPayloadBytes int

	// MaxMetadataBytes bounds a message's metadata, counted as PostgreSQL's
	// jsonb stores it: 4 bytes, plus 8 per entry, plus the UTF-8 bytes of
	// every key and value without JSON quotes or escapes. Larger metadata is
	// a *ValidationError (rule too_large) and nothing is stored. Defaults to
	// DefaultMaxMetadataBytes; at most MaxMetadataBytesLimit.
	MaxMetadataBytes int

	// Logger receives the client's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// GroupCommit makes concurrent Accept calls share transactions: each call
	// waits while a flusher sends the calls queued so far as one batch insert
	// (one commit), then gets its own result, exactly as without group commit.
	// If the batch's commit outcome is unknown, every call in it gets
	// ErrCommitUncertain. It raises throughput when many goroutines accept at
	// once; a lone call is sent at once. AcceptTx and AcceptBatch are unaffected.
	// Defaults to false.
	GroupCommit bool

	// GroupCommitMaxBatch is the most calls one group commit carries. Defaults
	// to DefaultGroupCommitMaxBatch.
	GroupCommitMaxBatch int

	// GroupCommitMaxWait is how long a flusher waits for a batch to fill before
	// sending fewer than GroupCommitMaxBatch calls. Defaults to zero: never
	// wait, so batches grow only while earlier ones are being committed.
	GroupCommitMaxWait time.Duration

	// AcceptMiddleware wraps every Accept and AcceptTx call (tracing,
	// metrics); the first is the outermost. Defaults to none.
	AcceptMiddleware []AcceptMiddleware

	// AcceptBatchMiddleware wraps every AcceptBatch and AcceptBatchTx call.
	// Defaults to none.
	AcceptBatchMiddleware []AcceptBatchMiddleware

	// GroupCommitFlushers is how many group commits may be in flight at once,
	// each on its own pool connection. Defaults to DefaultGroupCommitFlushers
	// (1): PostgreSQL serializes the commits of transactions that NOTIFY, so a
	// second flush against a nearby server mostly waits. Raise it when network
	// round trips to the server, not commits, are what calls wait for. With
	// GroupCommit, at most the pool's MaxConns.
	GroupCommitFlushers int

	// Nodes, on Citus, sends each scope's accepts to the worker node holding
	// its shards (ConnectNodes), with the pool's settings, instead of
	// through the pool's server. Defaults to nil: every accept goes through
	// the pool.
	Nodes *Nodes
}

// validate checks c for a pool of maxConns connections.
func (c Config) validate(maxConns int) error {
	switch {
	case c.MaxAttempts < 0 || c.MaxAttempts > MaxMaxAttempts:
		return configRange("Config.MaxAttempts", c.MaxAttempts, 1, MaxMaxAttempts)
	case c.MaxPayloadDepth < 0 || c.MaxPayloadDepth > MaxPayloadDepthLimit:
		return configRange("Config.MaxPayloadDepth", c.MaxPayloadDepth, 1, MaxPayloadDepthLimit)
	case c.MaxPayloadBytes < 0 || c.MaxPayloadBytes > MaxPayloadBytesLimit:
		return configRange("Config.MaxPayloadBytes", c.MaxPayloadBytes, 1, MaxPayloadBytesLimit)
	case c.MaxMetadataBytes < 0 || c.MaxMetadataBytes > MaxMetadataBytesLimit:
		return configRange("Config.MaxMetadataBytes", c.MaxMetadataBytes, 1, MaxMetadataBytesLimit)
	case c.GroupCommitMaxBatch < 0 || c.GroupCommitMaxBatch > 10_000:
		return configRange("Config.GroupCommitMaxBatch", c.GroupCommitMaxBatch, 1, 10_000)
	case c.GroupCommitFlushers < 0 || c.GroupCommitFlushers > 1_000:
		return configRange("Config.GroupCommitFlushers", c.GroupCommitFlushers, 1, 1_000)
	case c.GroupCommitMaxWait < 0 || c.GroupCommitMaxWait > time.Second:
		return &ConfigError{Field: "Config.GroupCommitMaxWait", Detail: fmt.Sprintf("%s: must be between 0 and 1s (every waiting Accept waits that long)", c.GroupCommitMaxWait)}
	}
	if err := checkGroupCommitPool(c, maxConns); err != nil {
		return err
	}
	return checkConsumerNames("Config.Consumers", c.Consumers)
}

func (c Config) withDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxPayloadDepth == 0 {
		c.MaxPayloadDepth = DefaultMaxPayloadDepth
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.MaxMetadataBytes == 0 {
		c.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.GroupCommitMaxBatch == 0 {
		c.GroupCommitMaxBatch = DefaultGroupCommitMaxBatch
	}
	if c.GroupCommitFlushers == 0 {
		c.GroupCommitFlushers = DefaultGroupCommitFlushers
	}
	return c
}

// configRange reports an integer field outside lo..hi (zero meaning the
// default is always allowed).
func configRange(field string, v, lo, hi int) error {
	return &ConfigError{Field: field, Detail: fmt.Sprintf("%d: must be between %d and %d (or 0 for the default)", v, lo, hi)}
}

package outbox

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/pginbox/pginbox/inbox"
)

// Defaults for RelayConfig fields left at their zero value.
const (
	DefaultBatchSize     = 100
	DefaultPollInterval  = time.Second
	DefaultLease         = time.Minute
	DefaultMaxAttempts   = 10
	DefaultRetention     = 24 * time.Hour
	DefaultShutdownGrace = 10 * time.Second
)

// Limits of RelayConfig fields.
const (
	MaxBatchSize   = 10_000
	MinLease       = 100 * time.Millisecond
	MaxLease       = 24 * time.Hour
	MaxMaxAttempts = math.MaxInt32
	MaxRetention   = 36500 * 24 * time.Hour // 100 years
)

// RelayConfig configures a Relay. Zero values mean the documented defaults;
// NewRelay rejects negative and out-of-range values with an
// *inbox.ConfigError naming the field.
type RelayConfig struct {
	// BatchSize is the most events one claim takes and one round of
	// publishing carries. Defaults to DefaultBatchSize; at most MaxBatchSize.
	BatchSize int

	// PollInterval is how often the relay looks for due events when no
	// notification arrives (retries come due without one). Defaults to
	// DefaultPollInterval; at most an hour.
	PollInterval time.Duration

	// PollOnly disables LISTEN/NOTIFY, for PgBouncer in transaction mode.
	PollOnly bool

	// Lease is how long a claim stays the relay's. An event whose relay died
	// returns to PENDING once its lease expires, and is published again.
	// Defaults to DefaultLease; between MinLease and MaxLease.
	Lease time.Duration

	// PublishTimeout bounds publishing one claimed batch (every Publish call
	// it takes); the Publisher's context ends then. It must be at most half
	// the Lease, so the claim is still held when the relay marks. Defaults to
	// Lease/3.
	PublishTimeout time.Duration

	// MaxAttempts is the retry budget: an event whose publish failed this many
	// times is DEAD. Defaults to DefaultMaxAttempts; at most MaxMaxAttempts.
	MaxAttempts int

	// Backoff returns the delay before retry number attempt (1 after the first
	// failure). Defaults to inbox.DefaultBackoff: 1s doubling up to 10m, with
	// jitter.
	Backoff func(attempt int) time.Duration

	// Retention is how long PUBLISHED events are kept before the relay
	// deletes them. Receivers deduplicate by event ID on their side, so this
	// is history for operators only. Defaults to DefaultRetention; at most
	// MaxRetention.
	Retention time.Duration

	// ShutdownGrace is how long Stop lets a batch being published finish
	// before cancelling its Publisher's context. Defaults to
	// DefaultShutdownGrace.
	ShutdownGrace time.Duration

	// Logger receives the relay's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// Nodes, on Citus, has the relay listen for Emit's wake-ups on every
	// worker node too (inbox.ConnectNodes): a handler transaction that runs
	// on a node (WorkerConfig.Nodes) wakes the relays listening there. The
	// relay claims and publishes through its pool as before. Defaults to
	// nil: it listens on its pool's server only.
	Nodes *inbox.Nodes
}

func (c RelayConfig) validate() error {
	switch {
	case c.BatchSize < 0 || c.BatchSize > MaxBatchSize:
		return configRange("RelayConfig.BatchSize", c.BatchSize, MaxBatchSize)
	case c.MaxAttempts < 0 || c.MaxAttempts > MaxMaxAttempts:
		return configRange("RelayConfig.MaxAttempts", c.MaxAttempts, MaxMaxAttempts)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"RelayConfig.PollInterval", c.PollInterval},
		{"RelayConfig.Lease", c.Lease},
		{"RelayConfig.PublishTimeout", c.PublishTimeout},
		{"RelayConfig.Retention", c.Retention},
		{"RelayConfig.ShutdownGrace", c.ShutdownGrace},
	} {
		if f.v < 0 {
			return &inbox.ConfigError{Field: f.name, Detail: fmt.Sprintf("%s: must not be negative (0 means the default)", f.v)}
		}
	}
	lease := c.Lease
	if lease == 0 {
		lease = DefaultLease
	}
	switch {
	case c.Lease != 0 && (c.Lease < MinLease || c.Lease > MaxLease):
		return &inbox.ConfigError{Field: "RelayConfig.Lease", Detail: fmt.Sprintf("%s: must be between %s and %s", c.Lease, MinLease, MaxLease)}
	case c.PublishTimeout > lease/2:
		return &inbox.ConfigError{Field: "RelayConfig.PublishTimeout", Detail: fmt.Sprintf("%s: must be at most half the Lease (%s), so a claim is still held when the relay marks what it published; raise Lease or leave PublishTimeout 0 for Lease/3", c.PublishTimeout, lease)}
	case c.PollInterval > time.Hour:
		return &inbox.ConfigError{Field: "RelayConfig.PollInterval", Detail: fmt.Sprintf("%s: must be at most 1h (retries come due only at a poll)", c.PollInterval)}
	case c.Retention > MaxRetention:
		return &inbox.ConfigError{Field: "RelayConfig.Retention", Detail: fmt.Sprintf("%s: must be at most %s (100 years)", c.Retention, MaxRetention)}
	}
	return nil
}

// checkPool refuses a pool of fewer connections than the relay holds: one
// for claims and marks, one for recovery and retention, one for LISTEN
// unless PollOnly.
func (c RelayConfig) checkPool(maxConns int) error {
	need, uses := 3, "claims and marks, maintenance, LISTEN"
	if c.PollOnly {
		need, uses = 2, "claims and marks, maintenance"
	}
	if maxConns < need {
		return &inbox.ConfigError{Field: "pgxpool.Config.MaxConns", Detail: fmt.Sprintf("pool MaxConns %d is below the %d connections a relay holds (%s): raise pool_max_conns", maxConns, need, uses)}
	}
	return nil
}

func (c RelayConfig) withDefaults() RelayConfig {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = c.Lease / 3
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Backoff == nil {
		c.Backoff = inbox.DefaultBackoff
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func configRange(field string, v, hi int) error {
	return &inbox.ConfigError{Field: field, Detail: fmt.Sprintf("%d: must be between 1 and %d (or 0 for the default)", v, hi)}
}

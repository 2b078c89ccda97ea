package inbox

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inboxtype"
)

// Defaults for WorkerConfig fields left at their zero value.
const (
	DefaultConcurrency    = 10
	DefaultClaimBatch     = 10 // the least; see WorkerConfig.ClaimBatch
	DefaultClaimScopes    = 16
	DefaultPollInterval   = time.Second
	DefaultLease          = 30 * time.Second
	DefaultHandlerTimeout = time.Minute
	DefaultShutdownGrace  = 10 * time.Second

	DefaultBackoffBase   = time.Second
	DefaultBackoffFactor = 2.0
	DefaultBackoffMax    = 10 * time.Minute
	DefaultBackoffJitter = 0.2
)

// Limits of WorkerConfig fields.
const (
	MaxConcurrency    = 10_000
	MaxClaimBatch     = 10_000
	MaxClaimScopes    = 10_000
	MaxMessagesPerTx  = 1_000
	MinLease          = 100 * time.Millisecond
	MaxLease          = 24 * time.Hour
	MaxHandlerTimeout = 24 * time.Hour
)

// WorkerConfig configures a Worker. Zero values mean the documented defaults;
// NewWorker rejects negative and out-of-range values with a *ConfigError.
//
// Sizing the pgx pool: a worker holds one connection per running handler
// (Concurrency), one for LISTEN (unless PollOnly) and briefly one for claims,
// heartbeats and recovery. NewWorker refuses a pool with MaxConns below
// Concurrency+2 (Concurrency+1 with PollOnly), because a heartbeat that cannot
// get a connection loses its lease. With a SystemPool, LISTEN, claims,
// heartbeats and recovery run there, and the worker's pool needs
// Concurrency+1 (the one ends a hung handler's session). Add what Accept
// needs when the same pool also serves ingress.
type WorkerConfig struct {
	// Consumers this worker owns: it claims, recovers and dead-letters receipts of
	// these consumers only. Every one must have a handler. Defaults to every
	// consumer in the registry.
	Consumers []string

	// Concurrency is the number of handlers running at once. Defaults to
	// DefaultConcurrency, lowered to what the pool leaves room for (MaxConns
	// minus 2, see above) so a default pgxpool works on any machine; an
	// explicit value the pool cannot serve is a *ConfigError.
	Concurrency int

	// ClaimBatch is the most receipts claimed by one query, and how many
	// claimed receipts may wait for a handler beyond the running ones (their
	// leases are extended while they wait). Defaults to Concurrency x
	// MessagesPerTx, so one claim can fill every handler slot, but at least
	// DefaultClaimBatch and at most MaxClaimBatch.
	ClaimBatch int

	// ClaimScopes is the most scopes (tenants, and the global scope) one claim
	// serves. A claim takes the scopes with due work in turns, each with an
	// equal share of the claim (ClaimBatch divided by the scopes served, at
	// least one), oldest first within a scope, so a tenant with a large
	// backlog cannot hold another tenant's messages behind it; the next claim
	// begins after the last scope served. A claim serves fewer scopes when
	// their shares would be smaller than MessagesPerTx (a claim of n serves
	// at most n / MessagesPerTx scopes), so a handler transaction can be full:
	// the scopes left out come first in the next claims. On one server that is one statement
	// walking the due index scope by scope; on Citus (pginbox's tables
	// distributed, see docs/SCALE-OUT.md) a lock-free read across the shards
	// lists the scopes with due work, oldest due first (the next claims reuse
	// that list for a few times what the read cost), and each scope is
	// claimed in a short transaction on its node. Defaults to
	// DefaultClaimScopes, at most MaxClaimScopes.
	ClaimScopes int

	// MessagesPerTx is the most messages one handler transaction carries. Above
	// 1, a handler slot takes up to this many queued receipts of one scope (a
	// transaction carries one scope; scopes take turns) and runs them in one
	// transaction with one commit, saving a disk flush per message. When a
	// message fails, only it is charged: the others run again without it (see
	// docs/HANDLERS.md, "Batched transactions"). The messages of a batch wait
	// for each other's handlers before committing. Defaults to 1.
	MessagesPerTx int

	// PollInterval is how often the worker looks for due work when no
	// notification arrives (retries come due without one). Defaults to
	// DefaultPollInterval.
	PollInterval time.Duration

	// PollOnly disables LISTEN/NOTIFY, for PgBouncer in transaction mode: the
	// worker needs no listener connection.
	PollOnly bool

	// Lease is how long a claim stays valid without a heartbeat. Defaults to
	// DefaultLease.
	Lease time.Duration

	// HeartbeatInterval is how often a running handler's lease is extended.
	// Defaults to Lease/3.
	HeartbeatInterval time.Duration

	// RecoverInterval is how often expired leases are recovered. Defaults to
	// Lease/2.
	RecoverInterval time.Duration

	// HandlerTimeout bounds one handler call and its transaction: the handler's
	// context is cancelled at the deadline, and the transaction's statement and
	// idle-in-transaction timeouts end it even if the handler ignores its
	// context. Defaults to DefaultHandlerTimeout.
	HandlerTimeout time.Duration

	// Backoff returns the delay before retry number attempt (1 after the first
	// failure). Defaults to DefaultBackoff.
	Backoff func(attempt int) time.Duration

	// ShutdownGrace is how long Stop lets running handlers finish before
	// cancelling them. Defaults to DefaultShutdownGrace.
	ShutdownGrace time.Duration

	// HandlerMiddleware wraps every handler call, inside the message's
	// transaction; the first is the outermost. Defaults to none.
	HandlerMiddleware []handler.Middleware

	// Logger receives the worker's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// SystemPool runs the parts that work across tenants: claims, heartbeats,
	// lease recovery, releases and LISTEN. With row-level security enabled
	// (schema.EnableTenancy) its role needs BYPASSRLS, while the worker's own
	// pool can use the restricted application role: every handler transaction
	// (payload load, handler, completion) and every failure update runs there
	// with the receipt's scope applied first. Its MaxConns must be at least 2
	// (LISTEN and the bookkeeping), or 1 with PollOnly. Defaults to the
	// worker's pool.
	SystemPool *pgxpool.Pool

	// Nodes, on Citus, runs the worker's sessions on the worker nodes
	// (ConnectNodes): it claims on every node from that node's shards, runs
	// each handler transaction, failure, release and heartbeat on its
	// receipt's node, recovers expired leases node by node, and listens for
	// wake-ups on every node and on the pool's server. Its pools copy the
	// worker's pool and SystemPool. Defaults to nil: every session on the
	// worker's pools.
	Nodes *Nodes
}

// DefaultBackoff is exponential backoff with jitter: 1s, 2s, 4s, ... capped at
// 10 minutes, each multiplied by a random factor in [0.8, 1.2].
func DefaultBackoff(attempt int) time.Duration {
	return ExponentialBackoff(DefaultBackoffBase, DefaultBackoffFactor, DefaultBackoffMax, DefaultBackoffJitter)(attempt)
}

// ExponentialBackoff returns base*factor^(attempt-1), capped at max, then
// spread by +-jitter (0.2 means +-20%).
func ExponentialBackoff(base time.Duration, factor float64, max time.Duration, jitter float64) func(int) time.Duration {
	return func(attempt int) time.Duration {
		if attempt < 1 {
			attempt = 1
		}
		d := float64(base) * math.Pow(factor, float64(attempt-1))
		if d > float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
			d = float64(max)
		}
		if jitter > 0 {
			d *= 1 + jitter*(2*rand.Float64()-1)
		}
		return time.Duration(d)
	}
}

func (c WorkerConfig) validate() error {
	lease := c.Lease
	if lease == 0 {
		lease = DefaultLease
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"WorkerConfig.Concurrency", c.Concurrency, MaxConcurrency},
		{"WorkerConfig.ClaimBatch", c.ClaimBatch, MaxClaimBatch},
		{"WorkerConfig.ClaimScopes", c.ClaimScopes, MaxClaimScopes},
		{"WorkerConfig.MessagesPerTx", c.MessagesPerTx, MaxMessagesPerTx},
	} {
		if f.v < 0 || f.v > f.max {
			return configRange(f.name, f.v, 1, f.max)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"WorkerConfig.PollInterval", c.PollInterval},
		{"WorkerConfig.Lease", c.Lease},
		{"WorkerConfig.HeartbeatInterval", c.HeartbeatInterval},
		{"WorkerConfig.RecoverInterval", c.RecoverInterval},
		{"WorkerConfig.HandlerTimeout", c.HandlerTimeout},
		{"WorkerConfig.ShutdownGrace", c.ShutdownGrace},
	} {
		if f.v < 0 {
			return &ConfigError{Field: f.name, Detail: fmt.Sprintf("%s: must not be negative (0 means the default)", f.v)}
		}
	}
	switch {
	case c.Lease != 0 && (c.Lease < MinLease || c.Lease > MaxLease):
		return &ConfigError{Field: "WorkerConfig.Lease", Detail: fmt.Sprintf("%s: must be between %s and %s", c.Lease, MinLease, MaxLease)}
	case c.HeartbeatInterval >= lease:
		return &ConfigError{Field: "WorkerConfig.HeartbeatInterval", Detail: fmt.Sprintf("%s: must be shorter than Lease (%s), or a lease expires between two heartbeats; leave it 0 for Lease/3", c.HeartbeatInterval, lease)}
	case c.HandlerTimeout > MaxHandlerTimeout:
		return &ConfigError{Field: "WorkerConfig.HandlerTimeout", Detail: fmt.Sprintf("%s: must be at most %s", c.HandlerTimeout, MaxHandlerTimeout)}
	case c.PollInterval > time.Hour:
		return &ConfigError{Field: "WorkerConfig.PollInterval", Detail: fmt.Sprintf("%s: must be at most 1h (retries come due only at a poll)", c.PollInterval)}
	}
	return nil
}

// conns says what a worker holds besides one connection per handler: spare
// on its own pool, sys on the SystemPool (0 without one), and what for.
func (c WorkerConfig) conns() (spare int, spareFor string, sys int, sysFor string) {
	bookkeeping, uses := 2, "listener, claims and heartbeats"
	if c.PollOnly {
		bookkeeping, uses = 1, "claims and heartbeats"
	}
	if c.SystemPool == nil {
		return bookkeeping, uses, 0, ""
	}
	return 1, "ending a hung handler's session", bookkeeping, uses
}

// checkPools refuses pools too small for the worker; maxConns is the
// worker's pool's size.
func (c WorkerConfig) checkPools(maxConns int) error {
	spare, spareFor, sys, sysFor := c.conns()
	if c.Concurrency > 0 && maxConns < c.Concurrency+spare {
		return &ConfigError{Field: "WorkerConfig.Concurrency", Detail: fmt.Sprintf("pool MaxConns %d is below Concurrency %d + %d (%s): raise pool_max_conns or lower WorkerConfig.Concurrency",
			maxConns, c.Concurrency, spare, spareFor)}
	}
	if maxConns < 1+spare {
		return &ConfigError{Field: "pgxpool.Config.MaxConns", Detail: fmt.Sprintf("pool MaxConns %d leaves no connection for a handler (the worker keeps %d for %s): raise pool_max_conns to at least %d",
			maxConns, spare, spareFor, 1+spare)}
	}
	if c.SystemPool != nil {
		if n := int(c.SystemPool.Config().MaxConns); n < sys {
			return &ConfigError{Field: "WorkerConfig.SystemPool", Detail: fmt.Sprintf("MaxConns %d is below %d (%s): raise its pool_max_conns", n, sys, sysFor)}
		}
	}
	return nil
}

// owned returns the consumers the worker owns: c.Consumers, or every
// consumer of reg. Each must be a valid name with a handler.
func (c WorkerConfig) owned(reg *handler.Registry) ([]string, error) {
	if len(c.Consumers) == 0 {
		owned := reg.Consumers()
		if len(owned) == 0 {
			return nil, &ConfigError{Field: "WorkerConfig.Consumers", Detail: "no consumers to own: register handlers or set WorkerConfig.Consumers"}
		}
		return owned, nil
	}
	if err := checkConsumerNames("WorkerConfig.Consumers", c.Consumers); err != nil {
		return nil, err
	}
	for _, name := range c.Consumers {
		if !reg.HasConsumer(name) {
			return nil, &ConfigError{Field: "WorkerConfig.Consumers", Detail: fmt.Sprintf("consumer %q is owned by this worker but has no handler: register its handlers or remove it from WorkerConfig.Consumers", name)}
		}
	}
	return append([]string(nil), c.Consumers...), nil
}

// checkConsumerNames applies the identity string rules to the consumer names
// of field.
func checkConsumerNames(field string, names []string) error {
	for i, name := range names {
		rule, detail := inboxtype.CheckIdentityString(name)
		switch {
		case rule == "":
		case name == "":
			return &ConfigError{Field: field, Detail: fmt.Sprintf("entry %d is empty: every consumer needs a name", i)}
		default:
			return &ConfigError{Field: field, Detail: fmt.Sprintf("entry %d %q: %s", i, name, detail)}
		}
	}
	return nil
}

// withDefaults fills zero fields; maxConns is the pool's size.
func (c WorkerConfig) withDefaults(maxConns int) WorkerConfig {
	if c.Concurrency == 0 {
		spare, _, _, _ := c.conns()
		c.Concurrency = max(1, min(DefaultConcurrency, maxConns-spare))
	}
	if c.MessagesPerTx <= 0 {
		c.MessagesPerTx = 1
	}
	if c.ClaimBatch <= 0 {
		c.ClaimBatch = min(MaxClaimBatch, max(DefaultClaimBatch, c.Concurrency*c.MessagesPerTx))
	}
	if c.ClaimScopes <= 0 {
		c.ClaimScopes = DefaultClaimScopes
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.RecoverInterval <= 0 {
		c.RecoverInterval = c.Lease / 2
	}
	if c.HandlerTimeout <= 0 {
		c.HandlerTimeout = DefaultHandlerTimeout
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

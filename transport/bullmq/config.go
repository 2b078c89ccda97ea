package bullmq

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/redisbase"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultPrefix        = "bull" // BullMQ's default key prefix
	DefaultDeliveryLimit = 20
	DefaultLockDuration  = 30 * time.Second // BullMQ's default lockDuration
	DefaultBlock         = time.Second
	DefaultConcurrency   = 10
)

// Accepter is the part of *inbox.Client the consumer uses.
type Accepter interface {
	// Accept is (*inbox.Client).Accept.
	Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error)
}

// Job is a BullMQ job as the Consumer took it.
type Job struct {
	ID   string // the job's ID in its queue
	Name string // the name the producer gave Queue.add
	// Data is the job's data, the JSON the producer passed to Queue.add.
	Data []byte
	// Opts is the job's options as JSON.
	Opts []byte
	// Timestamp is when the job was created.
	Timestamp time.Time
	// AttemptsStarted is how many times the job was taken, this time
	// included (BullMQ's "ats").
	AttemptsStarted int64
	// Fields is the whole job hash.
	Fields map[string]string
}

// Config configures a Consumer.
type Config struct {
	// Redis is the client to use, e.g. redis.NewClient(...). Required.
	Redis redis.UniversalClient

	// Queue is the BullMQ queue's name (the name given to new Queue(...) in
	// Node). Required.
	Queue string

	// Prefix is the queue's key prefix (BullMQ's prefix option). Defaults
	// to DefaultPrefix.
	Prefix string

	// Scope is the tenant (or global scope) of every job of the queue:
	// configuration decides it, never a job. Required.
	Scope inbox.Scope

	// Decode maps a job to the inbox message to accept. Required. The
	// message's Scope is overwritten with Scope; when it leaves MessageID
	// empty, the job ID (or the IDField of the job's data) is used. An error
	// from Decode fails the job (reason "decode").
	Decode func(Job) (inbox.Message, error)

	// IDField, when set, names a top-level string field of the job's data
	// that holds the producer's message ID, used when Decode leaves
	// MessageID empty. Defaults to "": the job ID is the message ID.
	IDField string

	// Worker is this instance's name, recorded in the jobs it takes
	// (BullMQ's "pb"). Defaults to "<hostname>-<pid>".
	Worker string

	// DeliveryLimit is how many times a job is taken before it is failed
	// (reason ReasonDeliveryLimit). Retries are for storage failures, so
	// DeliveryLimit times LockDuration is about how long a database outage
	// may last before jobs fail. Defaults to DefaultDeliveryLimit.
	DeliveryLimit int64

	// LockDuration is the lock a taken job holds: a job not completed
	// within it (a retry, or a crashed Consumer) goes back to wait when it
	// expires. An accept is bounded by half of it and the move to completed
	// or failed after it by a quarter, so the lock outlives both. Defaults
	// to DefaultLockDuration.
	LockDuration time.Duration

	// Block is how long Run waits for a new job before it looks again (for
	// due delayed jobs, and a cancelled context). From a second up, Run
	// waits on BullMQ's marker and wakes as soon as a job is added; below a
	// second it polls every Block. Defaults to DefaultBlock.
	Block time.Duration

	// Concurrency is how many jobs are accepted at once. Defaults to
	// DefaultConcurrency.
	Concurrency int

	// Logger receives the consumer's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// OnError receives the errors Run keeps going after but someone must act
	// on: ErrQueueLost, once per loss. It is called from Run's goroutine;
	// keep it short. Optional: the error is also logged at Error level and
	// counted in Stats.
	OnError func(error)
}

func (c Config) validate() error {
	return cfgerr.First("bullmq",
		redisbase.Check(c.Redis, c.Scope, c.Decode != nil, "a job", c.DeliveryLimit, c.Block),
		cfgerr.If(c.Queue == "", "Config.Queue is required: name the BullMQ queue to consume"),
		cfgerr.If(c.LockDuration < 20*time.Millisecond, "Config.LockDuration is %v: it must be at least 20ms", c.LockDuration),
		cfgerr.AtLeast("Config.Concurrency", c.Concurrency, 1),
	)
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.Worker = cmp.Or(c.Worker, redisbase.Worker())
	c.DeliveryLimit = cmp.Or(c.DeliveryLimit, DefaultDeliveryLimit)
	c.LockDuration = cmp.Or(c.LockDuration, DefaultLockDuration)
	c.Block = cmp.Or(c.Block, DefaultBlock)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	return c
}

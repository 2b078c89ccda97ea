// Command bullmq-inbox accepts the jobs of a BullMQ queue into a pginbox
// inbox: each job is moved to completed only after its accept committed,
// left active and taken again after its lock expires when the database
// fails, and moved to failed (with the reason) when it can never be
// accepted.
//
//	bullmq-inbox -database-url postgres://app@localhost/app -queue orders \
//	    -tenant acme -source shop -consumer orders.projection.v1
//
// The message ID is the job ID (or, with -id-field, a field of the job's
// data), the payload the job's data, and the event type the job's name
// unless -event-type is set. The scope comes from the flags (one tenant, or
// -global), never from the job. It runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/bullmq"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
)

func main() { brokercmd.Main(run) }

type options struct {
	inbox                                  brokercmd.Inbox
	redisURL, queue, prefix, name, idField string
	deliveryLimit                          int64
	lockDuration                           time.Duration
	concurrency                            int
}

func (o *options) parse(args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bullmq-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.redisURL, "redis-url", brokercmd.Or(getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"), "Redis URL (env REDIS_URL)")
	fs.StringVar(&o.queue, "queue", "", "BullMQ queue to consume (required)")
	fs.StringVar(&o.prefix, "prefix", bullmq.DefaultPrefix, "the queue's key prefix (BullMQ's prefix option)")
	fs.StringVar(&o.name, "name", "", "this worker's name, recorded in the jobs it takes (default: hostname-pid)")
	fs.StringVar(&o.idField, "id-field", "", "field of the job's data holding the message ID (default: the job ID)")
	fs.Int64Var(&o.deliveryLimit, "delivery-limit", bullmq.DefaultDeliveryLimit, "takes before a job is failed")
	fs.DurationVar(&o.lockDuration, "lock-duration", bullmq.DefaultLockDuration, "lock of a taken job: a job not completed within it is taken again")
	fs.IntVar(&o.concurrency, "concurrency", bullmq.DefaultConcurrency, "jobs accepted at once")
	o.inbox.Register(fs, getenv, "the job's name")
	if err := brokercmd.Parse(fs, args); err != nil {
		return err
	}
	if o.queue == "" {
		return errors.New("-queue is required")
	}
	return o.inbox.Check()
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var o options
	return brokercmd.Run("bullmq-inbox", stderr,
		func() error { return o.parse(args, getenv, stderr) },
		func(log *slog.Logger) error { return serve(ctx, &o, log) })
}

func serve(ctx context.Context, o *options, log *slog.Logger) error {
	ropts, err := redis.ParseURL(o.redisURL)
	if err != nil {
		return fmt.Errorf("-redis-url: %w", err)
	}
	pool, client, err := o.inbox.Open(ctx, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	c, err := bullmq.NewConsumer(client, bullmq.Config{
		Redis:         rdb,
		Queue:         o.queue,
		Prefix:        o.prefix,
		Scope:         o.inbox.Scope(),
		Worker:        o.name,
		IDField:       o.idField,
		DeliveryLimit: o.deliveryLimit,
		LockDuration:  o.lockDuration,
		Concurrency:   o.concurrency,
		Logger:        log,
		Decode: func(j bullmq.Job) (inbox.Message, error) {
			if j.Name == "" && o.inbox.EventType == "" {
				return inbox.Message{}, errors.New("no event type: give the job a name, or run with -event-type")
			}
			return o.inbox.Message(j.Name, j.Data), nil
		},
	})
	if err != nil {
		return err
	}
	log.Info("bullmq-inbox: consuming", "queue", o.queue, "consumer", o.inbox.Consumer)
	return c.Run(ctx)
}

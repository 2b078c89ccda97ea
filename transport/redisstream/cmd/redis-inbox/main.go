// Command redis-inbox accepts the entries of a Redis stream into a pginbox
// inbox through a consumer group: each entry is acknowledged (XACK) only
// after its accept committed, left pending and claimed again when the
// database fails, and dead-lettered when it can never be accepted.
//
//	redis-inbox -database-url postgres://app@localhost/app -stream orders \
//	    -dead-letter-stream orders:dead -tenant acme -source shop -consumer orders.projection.v1
//
// Entries carry the fields message_id (the producer's event ID), payload
// (JSON) and, unless -event-type is set, type (the event type). The scope
// comes from the flags (one tenant, or -global), never from the entry. It
// runs until SIGINT or SIGTERM.
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
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/redisstream"
)

func main() { brokercmd.Main(run) }

type options struct {
	inbox                             brokercmd.Inbox
	redisURL, stream, group, name, dl string
	maxDeliveries                     int64
	claimIdle                         time.Duration
}

func (o *options) parse(args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("redis-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.redisURL, "redis-url", brokercmd.Or(getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"), "Redis URL (env REDIS_URL)")
	fs.StringVar(&o.stream, "stream", "", "stream to consume (required)")
	fs.StringVar(&o.group, "group", "pginbox", "consumer group")
	fs.StringVar(&o.name, "name", "", "this instance's name in the group (default: hostname-pid)")
	fs.StringVar(&o.dl, "dead-letter-stream", "", "stream for rejected and exhausted entries (required)")
	fs.Int64Var(&o.maxDeliveries, "max-deliveries", redisstream.DefaultMaxDeliveries, "deliveries before an entry is dead-lettered")
	fs.DurationVar(&o.claimIdle, "claim-idle", redisstream.DefaultClaimIdle, "how long an entry stays pending before it is claimed again")
	o.inbox.Register(fs, getenv, "the entry's type field")
	if err := brokercmd.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case o.stream == "":
		return errors.New("-stream is required")
	case o.dl == "":
		return errors.New("-dead-letter-stream is required")
	}
	return o.inbox.Check()
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var o options
	return brokercmd.Run("redis-inbox", stderr,
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
	c, err := redisstream.NewConsumer(client, redisstream.Config{
		Redis:            rdb,
		Scope:            o.inbox.Scope(),
		Stream:           o.stream,
		Group:            o.group,
		Consumer:         o.name,
		DeadLetterStream: o.dl,
		MaxDeliveries:    o.maxDeliveries,
		ClaimIdle:        o.claimIdle,
		Logger:           log,
		Decode: func(m redis.XMessage) (inbox.Message, error) {
			eventType, _ := m.Values["type"].(string)
			if eventType == "" && o.inbox.EventType == "" {
				return inbox.Message{}, errors.New(`no event type: add a "type" field, or run with -event-type`)
			}
			payload, _ := m.Values["payload"].(string)
			if payload == "" {
				return inbox.Message{}, errors.New(`no "payload" field`)
			}
			return o.inbox.Message(eventType, []byte(payload)), nil
		},
	})
	if err != nil {
		return err
	}
	log.Info("redis-inbox: consuming", "stream", o.stream, "group", o.group, "consumer", o.inbox.Consumer)
	return c.Run(ctx)
}

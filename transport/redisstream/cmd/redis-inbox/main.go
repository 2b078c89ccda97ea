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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/schema"
	"github.com/pginbox/pginbox/transport/redisstream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

type options struct {
	redisURL, databaseURL               string
	stream, group, name, deadLetter     string
	tenant, source, consumer, eventType string
	global                              bool
	schemaVersion                       int
	maxDeliveries                       int64
	claimIdle                           time.Duration
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("redis-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.redisURL, "redis-url", or(getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"), "Redis URL (env REDIS_URL)")
	fs.StringVar(&o.databaseURL, "database-url", getenv("DATABASE_URL"), "PostgreSQL connection string (env DATABASE_URL)")
	fs.StringVar(&o.stream, "stream", "", "stream to consume (required)")
	fs.StringVar(&o.group, "group", "pginbox", "consumer group")
	fs.StringVar(&o.name, "name", "", "this instance's name in the group (default: hostname-pid)")
	fs.StringVar(&o.deadLetter, "dead-letter-stream", "", "stream for rejected and exhausted entries (required)")
	fs.StringVar(&o.tenant, "tenant", "", "tenant ID every entry belongs to (or -global)")
	fs.BoolVar(&o.global, "global", false, "entries belong to the global scope")
	fs.StringVar(&o.source, "source", "", "producer system, part of the identity (required)")
	fs.StringVar(&o.consumer, "consumer", "", "inbox consumer, e.g. orders.projection.v1 (required)")
	fs.StringVar(&o.eventType, "event-type", "", "event type of every entry (default: the entry's type field)")
	fs.IntVar(&o.schemaVersion, "schema-version", 1, "schema version of every entry")
	fs.Int64Var(&o.maxDeliveries, "max-deliveries", redisstream.DefaultMaxDeliveries, "deliveries before an entry is dead-lettered")
	fs.DurationVar(&o.claimIdle, "claim-idle", redisstream.DefaultClaimIdle, "how long an entry stays pending before it is claimed again")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.databaseURL == "":
		return o, errors.New("-database-url (or DATABASE_URL) is required")
	case o.stream == "":
		return o, errors.New("-stream is required")
	case o.deadLetter == "":
		return o, errors.New("-dead-letter-stream is required")
	case o.tenant == "" && !o.global:
		return o, errors.New("-tenant or -global is required: the scope comes from configuration, never from the entry")
	case o.tenant != "" && o.global:
		return o, errors.New("-tenant and -global exclude each other")
	case o.source == "":
		return o, errors.New("-source is required")
	case o.consumer == "":
		return o, errors.New("-consumer is required")
	}
	return o, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o, err := parse(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "redis-inbox: %v (see -help)\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serve(ctx, o, log); err != nil {
		fmt.Fprintf(stderr, "redis-inbox: %v\n", err)
		return exitError
	}
	return exitOK
}

func serve(ctx context.Context, o options, log *slog.Logger) error {
	ropts, err := redis.ParseURL(o.redisURL)
	if err != nil {
		return fmt.Errorf("-redis-url: %w", err)
	}
	pool, err := pgxpool.New(ctx, o.databaseURL)
	if err != nil {
		return fmt.Errorf("-database-url: %w", err)
	}
	defer pool.Close()
	if err := schema.Check(ctx, pool); err != nil {
		return err // says to run `inbox migrate up` when that is the problem
	}
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{o.consumer}, Logger: log})
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	scope := inbox.Global()
	if !o.global {
		scope = inbox.Tenant(o.tenant)
	}
	c, err := redisstream.NewConsumer(client, redisstream.Config{
		Redis:            rdb,
		Scope:            scope,
		Stream:           o.stream,
		Group:            o.group,
		Consumer:         o.name,
		DeadLetterStream: o.deadLetter,
		MaxDeliveries:    o.maxDeliveries,
		ClaimIdle:        o.claimIdle,
		Logger:           log,
		Decode: func(m redis.XMessage) (inbox.Message, error) {
			eventType := o.eventType
			if eventType == "" {
				eventType, _ = m.Values["type"].(string)
			}
			if eventType == "" {
				return inbox.Message{}, errors.New(`no event type: add a "type" field, or run with -event-type`)
			}
			payload, _ := m.Values["payload"].(string)
			if payload == "" {
				return inbox.Message{}, errors.New(`no "payload" field`)
			}
			return inbox.Message{
				Identity:      inbox.Identity{Source: o.source, Consumer: o.consumer},
				EventType:     eventType,
				SchemaVersion: o.schemaVersion,
				Payload:       json.RawMessage(payload),
			}, nil
		},
	})
	if err != nil {
		return err
	}
	log.Info("redis-inbox: consuming", "stream", o.stream, "group", o.group, "consumer", o.consumer)
	return c.Run(ctx)
}

// Command nats-inbox accepts the messages of a JetStream stream into a
// pginbox inbox: each message is acked only after its accept committed,
// retried with NakWithDelay when the database fails, and dead-lettered when
// it can never be accepted.
//
//	nats-inbox -database-url postgres://app@localhost/app -stream ORDERS \
//	    -dead-letter-subject orders.dead -tenant acme -source shop -consumer orders.projection.v1
//
// The scope comes from the flags (one tenant, or -global), never from the
// payload. The message ID is the Nats-Msg-Id header, the event type the
// message subject unless -event-type is set, the payload the message data
// (JSON). It runs until SIGINT or SIGTERM.
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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/schema"
	pgnats "github.com/pginbox/pginbox/transport/nats"
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
	natsURL, databaseURL                   string
	stream, durable, subject, deadLetter   string
	tenant, source, consumer, eventType    string
	global                                 bool
	schemaVersion, maxDeliver, concurrency int
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("nats-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.natsURL, "nats-url", or(getenv("NATS_URL"), nats.DefaultURL), "NATS server URL (env NATS_URL)")
	fs.StringVar(&o.databaseURL, "database-url", getenv("DATABASE_URL"), "PostgreSQL connection string (env DATABASE_URL)")
	fs.StringVar(&o.stream, "stream", "", "JetStream stream to consume (required)")
	fs.StringVar(&o.durable, "durable", "pginbox", "durable consumer name")
	fs.StringVar(&o.subject, "subject", "", "consume only this subject (default: the whole stream)")
	fs.StringVar(&o.deadLetter, "dead-letter-subject", "", "subject for rejected and exhausted messages; a stream must capture it (required)")
	fs.StringVar(&o.tenant, "tenant", "", "tenant ID every message belongs to (or -global)")
	fs.BoolVar(&o.global, "global", false, "messages belong to the global scope")
	fs.StringVar(&o.source, "source", "", "producer system, part of the identity (required)")
	fs.StringVar(&o.consumer, "consumer", "", "inbox consumer, e.g. orders.projection.v1 (required)")
	fs.StringVar(&o.eventType, "event-type", "", "event type of every message (default: the message subject)")
	fs.IntVar(&o.schemaVersion, "schema-version", 1, "schema version of every message")
	fs.IntVar(&o.maxDeliver, "max-deliver", pgnats.DefaultMaxDeliver, "deliveries before a message is dead-lettered")
	fs.IntVar(&o.concurrency, "concurrency", pgnats.DefaultConcurrency, "messages accepted at once")
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
		return o, errors.New("-dead-letter-subject is required")
	case o.tenant == "" && !o.global:
		return o, errors.New("-tenant or -global is required: the scope comes from configuration, never from the payload")
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
		fmt.Fprintf(stderr, "nats-inbox: %v (see -help)\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serve(ctx, o, log); err != nil {
		fmt.Fprintf(stderr, "nats-inbox: %v\n", err)
		return exitError
	}
	return exitOK
}

func serve(ctx context.Context, o options, log *slog.Logger) error {
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
	scope := inbox.Global()
	if !o.global {
		scope = inbox.Tenant(o.tenant)
	}
	cfg := pgnats.Config{
		URL:               o.natsURL,
		ConnectOptions:    []nats.Option{nats.Name("nats-inbox")},
		Scope:             scope,
		Stream:            o.stream,
		Durable:           o.durable,
		DeadLetterSubject: o.deadLetter,
		MaxDeliver:        o.maxDeliver,
		Concurrency:       o.concurrency,
		Logger:            log,
		Decode: func(m jetstream.Msg) (inbox.Message, error) {
			eventType := o.eventType
			if eventType == "" {
				eventType = m.Subject()
			}
			return inbox.Message{
				Identity:      inbox.Identity{Source: o.source, Consumer: o.consumer},
				EventType:     eventType,
				SchemaVersion: o.schemaVersion,
				Payload:       json.RawMessage(m.Data()),
			}, nil
		},
	}
	if o.subject != "" {
		cfg.FilterSubjects = []string{o.subject}
	}
	c, err := pgnats.NewConsumer(client, cfg)
	if err != nil {
		return err
	}
	log.Info("nats-inbox: consuming", "stream", o.stream, "durable", o.durable, "consumer", o.consumer)
	return c.Run(ctx)
}

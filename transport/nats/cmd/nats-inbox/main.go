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
	"errors"
	"flag"
	"io"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

func main() { brokercmd.Main(run) }

type options struct {
	inbox                                 brokercmd.Inbox
	natsURL, stream, durable, subject, dl string
	maxDeliver, concurrency               int
}

func (o *options) parse(args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("nats-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.natsURL, "nats-url", brokercmd.Or(getenv("NATS_URL"), nats.DefaultURL), "NATS server URL (env NATS_URL)")
	fs.StringVar(&o.stream, "stream", "", "JetStream stream to consume (required)")
	fs.StringVar(&o.durable, "durable", "pginbox", "durable consumer name")
	fs.StringVar(&o.subject, "subject", "", "consume only this subject (default: the whole stream)")
	fs.StringVar(&o.dl, "dead-letter-subject", "", "subject for rejected and exhausted messages; a stream must capture it (required)")
	fs.IntVar(&o.maxDeliver, "max-deliver", pgnats.DefaultMaxDeliver, "deliveries before a message is dead-lettered")
	fs.IntVar(&o.concurrency, "concurrency", pgnats.DefaultConcurrency, "messages accepted at once")
	o.inbox.Register(fs, getenv, "the message subject")
	if err := brokercmd.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case o.stream == "":
		return errors.New("-stream is required")
	case o.dl == "":
		return errors.New("-dead-letter-subject is required")
	}
	return o.inbox.Check()
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var o options
	return brokercmd.Run("nats-inbox", stderr,
		func() error { return o.parse(args, getenv, stderr) },
		func(log *slog.Logger) error { return serve(ctx, &o, log) })
}

func serve(ctx context.Context, o *options, log *slog.Logger) error {
	pool, client, err := o.inbox.Open(ctx, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := pgnats.Config{
		URL:               o.natsURL,
		ConnectOptions:    []nats.Option{nats.Name("nats-inbox")},
		Scope:             o.inbox.Scope(),
		Stream:            o.stream,
		Durable:           o.durable,
		DeadLetterSubject: o.dl,
		MaxDeliver:        o.maxDeliver,
		Concurrency:       o.concurrency,
		Logger:            log,
		Decode: func(m jetstream.Msg) (inbox.Message, error) {
			return o.inbox.Message(m.Subject(), m.Data()), nil
		},
	}
	if o.subject != "" {
		cfg.FilterSubjects = []string{o.subject}
	}
	c, err := pgnats.NewConsumer(client, cfg)
	if err != nil {
		return err
	}
	log.Info("nats-inbox: consuming", "stream", o.stream, "durable", o.durable, "consumer", o.inbox.Consumer)
	return c.Run(ctx)
}

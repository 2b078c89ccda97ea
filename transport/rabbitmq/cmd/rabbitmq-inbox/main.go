// Command rabbitmq-inbox consumes one RabbitMQ queue into a pginbox inbox.
//
//	rabbitmq-inbox -database-url postgres://app@localhost/app -url amqp://guest:guest@127.0.0.1:5672/ \
//	  -queue orders -tenant acme -source shop -consumer orders.projection.v1 -declare
//
// Each message needs the message-id property (the producer's event ID) and,
// unless -event-type is set, the type property (the event type); the body is
// the JSON payload, and an optional schema-version header gives its version
// (default: -schema-version). The scope comes from the flags (one tenant, or
// -global), never from the message. It runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

func main() { brokercmd.Main(run) }

type options struct {
	inbox          brokercmd.Inbox
	url, queue, dl string
	declare        bool
}

func (o *options) parse(args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("rabbitmq-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", brokercmd.Or(getenv("AMQP_URL"), "amqp://guest:guest@127.0.0.1:5672/"), "broker URL (env AMQP_URL)")
	fs.StringVar(&o.queue, "queue", "", "queue to consume (required)")
	fs.StringVar(&o.dl, "dlx", "", "dead-letter exchange (default: QUEUE.dlx)")
	fs.BoolVar(&o.declare, "declare", false, "declare QUEUE as a quorum queue, the dead-letter exchange (fanout) and a QUEUE.dead queue bound to it")
	o.inbox.Register(fs, getenv, "the type property")
	if err := brokercmd.Parse(fs, args); err != nil {
		return err
	}
	if o.queue == "" {
		return errors.New("-queue is required")
	}
	if o.dl == "" {
		o.dl = o.queue + ".dlx"
	}
	return o.inbox.Check()
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var o options
	return brokercmd.Run("rabbitmq-inbox", stderr,
		func() error { return o.parse(args, getenv, stderr) },
		func(log *slog.Logger) error { return serve(ctx, &o, log) })
}

func serve(ctx context.Context, o *options, log *slog.Logger) error {
	pool, client, err := o.inbox.Open(ctx, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := rabbitmq.Config{
		URL:                o.url,
		Queue:              o.queue,
		Scope:              o.inbox.Scope(),
		DeadLetterExchange: o.dl,
		Logger:             log,
		Decode: func(d amqp.Delivery) (inbox.Message, error) {
			if d.MessageId == "" {
				return inbox.Message{}, errors.New("no message-id property: the producer must set its event ID there")
			}
			m := o.inbox.Message(d.Type, d.Body)
			m.MessageID = d.MessageId
			if v, ok := d.Headers["schema-version"].(int32); ok {
				m.SchemaVersion = int(v)
			}
			return m, nil
		},
	}
	if o.declare {
		cfg.Setup = func(ch *amqp.Channel) error {
			if err := ch.ExchangeDeclare(o.dl, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
				return err
			}
			if _, err := ch.QueueDeclare(o.queue+".dead", true, false, false, false, nil); err != nil {
				return err
			}
			if err := ch.QueueBind(o.queue+".dead", "", o.dl, false, nil); err != nil {
				return err
			}
			_, err := ch.QueueDeclare(o.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
			return err
		}
	}
	c, err := rabbitmq.NewConsumer(client, cfg)
	if err != nil {
		return err
	}
	log.Info("rabbitmq-inbox: consuming", "queue", o.queue, "consumer", o.inbox.Consumer)
	return c.Run(ctx)
}

// Command rabbitmq-inbox consumes one RabbitMQ queue into a pginbox inbox.
//
//	DATABASE_URL=postgres://... rabbitmq-inbox -url amqp://guest:guest@127.0.0.1:5672/ \
//	  -queue orders -tenant acme -source shop -consumer orders.projection.v1 -declare
//
// Each message needs the message-id property (the producer's event ID) and
// the type property (the event type); the body is the JSON payload, and an
// optional schema-version header gives its version (default 1).
package main

import (
	"errors"
	"flag"
	"os"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/program"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

func main() { program.Main("rabbitmq-inbox", run) }

func run() error {
	url := flag.String("url", envOr("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), "broker URL (or $AMQP_URL)")
	queue := flag.String("queue", "", "queue to consume")
	dlx := flag.String("dlx", "", "dead-letter exchange (default: QUEUE.dlx)")
	declare := flag.Bool("declare", false, "declare QUEUE as a quorum queue, the dead-letter exchange (fanout) and a QUEUE.dead queue bound to it")
	tenant := flag.String("tenant", "", "tenant of every message of the queue (empty: global scope)")
	source := flag.String("source", "", "inbox source (the producing system)")
	consumer := flag.String("consumer", "", "inbox consumer the messages are for")
	flag.Parse()
	if *queue == "" || *source == "" || *consumer == "" {
		return errors.New("-queue, -source and -consumer are required (see -h)")
	}
	if *dlx == "" {
		*dlx = *queue + ".dlx"
	}
	ctx, client, done, err := program.Open(*consumer)
	if err != nil {
		return err
	}
	defer done()
	cfg := rabbitmq.Config{
		URL:                *url,
		Queue:              *queue,
		Scope:              program.Scope(*tenant),
		DeadLetterExchange: *dlx,
		Decode: func(d amqp.Delivery) (inbox.Message, error) {
			if d.MessageId == "" {
				return inbox.Message{}, errors.New("no message-id property: the producer must set its event ID there")
			}
			version := 1
			if v, ok := d.Headers["schema-version"].(int32); ok {
				version = int(v)
			}
			return inbox.Message{
				Identity:      inbox.Identity{Source: *source, Consumer: *consumer, MessageID: d.MessageId},
				EventType:     d.Type,
				SchemaVersion: version,
				Payload:       d.Body,
			}, nil
		},
	}
	if *declare {
		cfg.Setup = func(ch *amqp.Channel) error {
			if err := ch.ExchangeDeclare(*dlx, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
				return err
			}
			if _, err := ch.QueueDeclare(*queue+".dead", true, false, false, false, nil); err != nil {
				return err
			}
			if err := ch.QueueBind(*queue+".dead", "", *dlx, false, nil); err != nil {
				return err
			}
			_, err := ch.QueueDeclare(*queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
			return err
		}
	}
	c, err := rabbitmq.NewConsumer(client, cfg)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

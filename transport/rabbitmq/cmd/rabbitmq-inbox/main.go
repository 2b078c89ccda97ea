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
	"cmp"
	"errors"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

func main() { program.Main() }

type options struct {
	rabbitmq.Config
	declare bool
}

var program = brokercmd.Program[options]{Name: "rabbitmq-inbox", EventType: "the type property", Flags: flags, Check: check, Serve: serve}

// flags are the program's own flags; brokercmd adds the inbox's.
func flags(o *options) []brokercmd.Flag {
	return []brokercmd.Flag{
		brokercmd.Var(&o.URL, "url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL").Env("AMQP_URL"),
		brokercmd.Var(&o.Queue, "queue", "", "queue to consume").Required().Logged(),
		brokercmd.Var(&o.DeadLetterExchange, "dlx", "", "dead-letter exchange (default: QUEUE.dlx)"),
		brokercmd.Var(&o.declare, "declare", false, "declare QUEUE as a quorum queue, the dead-letter exchange (fanout) and a QUEUE.dead queue bound to it"),
	}
}

// check derives the defaults that depend on other flags.
func check(o *options) error {
	o.DeadLetterExchange = cmp.Or(o.DeadLetterExchange, o.Queue+".dlx")
	return nil
}

// serve makes the consumer of the configuration the flags set.
func serve(o *options, s *brokercmd.Session) (brokercmd.Runner, error) {
	o.Scope, o.Logger = s.Scope(), s.Log
	o.Decode = func(d amqp.Delivery) (inbox.Message, error) {
		if d.MessageId == "" {
			return inbox.Message{}, errors.New("no message-id property: the producer must set its event ID there")
		}
		m := s.Message(d.Type, d.Body)
		m.MessageID = d.MessageId
		if v, ok := d.Headers["schema-version"].(int32); ok {
			m.SchemaVersion = int(v)
		}
		return m, nil
	}
	if o.declare {
		o.Setup = o.declareAll
	}
	return rabbitmq.NewConsumer(s.Client, o.Config)
}

// declareAll declares the queue (quorum), the dead-letter exchange (fanout)
// and QUEUE.dead bound to it.
func (o *options) declareAll(ch *amqp.Channel) error {
	if err := ch.ExchangeDeclare(o.DeadLetterExchange, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(o.Queue+".dead", true, false, false, false, nil); err != nil {
		return err
	}
	if err := ch.QueueBind(o.Queue+".dead", "", o.DeadLetterExchange, false, nil); err != nil {
		return err
	}
	_, err := ch.QueueDeclare(o.Queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	return err
}

// Command kafka-inbox consumes Kafka topics into a pginbox inbox as one
// member of a consumer group.
//
//	kafka-inbox -database-url postgres://app@localhost/app -brokers 127.0.0.1:9092 -topic orders \
//	  -group orders-inbox -dlq orders.dead -tenant acme -source shop -consumer orders.projection.v1
//
// Each record carries the producer's event ID in the message-id header (or,
// without it, in its key) and, unless -event-type is set, the event type in
// the event-type header; the value is the JSON payload. The scope comes from
// the flags (one tenant, or -global), never from the record. It runs until
// SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/kafka"
)

func main() { brokercmd.Main(run) }

type options struct {
	inbox                     brokercmd.Inbox
	brokers, topic, group, dl string
	deliveryLimit             int
}

func (o *options) parse(args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("kafka-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.brokers, "brokers", getenv("KAFKA_BROKERS"), "seed brokers, comma separated (env KAFKA_BROKERS, required)")
	fs.StringVar(&o.topic, "topic", "", "topic to consume (required)")
	fs.StringVar(&o.group, "group", "", "consumer group (required)")
	fs.StringVar(&o.dl, "dlq", "", "dead-letter topic (default: TOPIC.dead)")
	fs.IntVar(&o.deliveryLimit, "delivery-limit", kafka.DefaultDeliveryLimit, "failed accepts before a record is dead-lettered")
	o.inbox.Register(fs, getenv, "the event-type header")
	if err := brokercmd.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case o.brokers == "":
		return errors.New("-brokers (or KAFKA_BROKERS) is required")
	case o.topic == "":
		return errors.New("-topic is required")
	case o.group == "":
		return errors.New("-group is required")
	}
	if o.dl == "" {
		o.dl = o.topic + ".dead"
	}
	return o.inbox.Check()
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var o options
	return brokercmd.Run("kafka-inbox", stderr,
		func() error { return o.parse(args, getenv, stderr) },
		func(log *slog.Logger) error { return serve(ctx, &o, log) })
}

func serve(ctx context.Context, o *options, log *slog.Logger) error {
	pool, client, err := o.inbox.Open(ctx, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	c, err := kafka.NewConsumer(client, kafka.Config{
		Brokers:         strings.Split(o.brokers, ","),
		Topics:          []string{o.topic},
		Group:           o.group,
		Scope:           o.inbox.Scope(),
		DeadLetterTopic: o.dl,
		DeliveryLimit:   o.deliveryLimit,
		Logger:          log,
		Decode: func(r *kgo.Record) (inbox.Message, error) {
			id, typ := string(r.Key), ""
			for _, h := range r.Headers {
				switch h.Key {
				case "message-id":
					id = string(h.Value)
				case "event-type":
					typ = string(h.Value)
				}
			}
			if id == "" {
				return inbox.Message{}, errors.New("no message-id header and no key: the producer must send its event ID")
			}
			m := o.inbox.Message(typ, r.Value)
			m.MessageID = id
			return m, nil
		},
	})
	if err != nil {
		return err
	}
	log.Info("kafka-inbox: consuming", "topic", o.topic, "group", o.group, "consumer", o.inbox.Consumer)
	return c.Run(ctx)
}

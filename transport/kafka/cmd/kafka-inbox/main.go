// Command kafka-inbox consumes Kafka topics into a pginbox inbox as one
// member of a consumer group.
//
//	DATABASE_URL=postgres://... kafka-inbox -brokers 127.0.0.1:9092 -topic orders \
//	  -group orders-inbox -dlq orders.dead -tenant acme -source shop -consumer orders.projection.v1
//
// Each record carries the producer's event ID in the message-id header (or,
// without it, in its key) and the event type in the event-type header; the
// value is the JSON payload (schema version 1).
package main

import (
	"errors"
	"flag"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/program"
	"github.com/pginbox/pginbox/transport/kafka"
)

func main() { program.Main("kafka-inbox", run) }

func run() error {
	brokers := flag.String("brokers", os.Getenv("KAFKA_BROKERS"), "seed brokers, comma separated (or $KAFKA_BROKERS)")
	topic := flag.String("topic", "", "topic to consume")
	group := flag.String("group", "", "consumer group")
	dlq := flag.String("dlq", "", "dead-letter topic (default: TOPIC.dead)")
	tenant := flag.String("tenant", "", "tenant of every record of the topic (empty: global scope)")
	source := flag.String("source", "", "inbox source (the producing system)")
	consumer := flag.String("consumer", "", "inbox consumer the records are for")
	flag.Parse()
	if *brokers == "" || *topic == "" || *group == "" || *source == "" || *consumer == "" {
		return errors.New("-brokers, -topic, -group, -source and -consumer are required (see -h)")
	}
	if *dlq == "" {
		*dlq = *topic + ".dead"
	}
	ctx, client, done, err := program.Open(*consumer)
	if err != nil {
		return err
	}
	defer done()
	c, err := kafka.NewConsumer(client, kafka.Config{
		Brokers:         strings.Split(*brokers, ","),
		Topics:          []string{*topic},
		Group:           *group,
		Scope:           program.Scope(*tenant),
		DeadLetterTopic: *dlq,
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
			return inbox.Message{
				Identity:      inbox.Identity{Source: *source, Consumer: *consumer, MessageID: id},
				EventType:     typ,
				SchemaVersion: 1,
				Payload:       r.Value,
			}, nil
		},
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

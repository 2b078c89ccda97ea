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
	"cmp"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/kafka"
)

func main() { program.Main() }

type options struct {
	kafka.Config
	topic string
}

var program = brokercmd.Program[options]{Name: "kafka-inbox", EventType: "the event-type header", Flags: flags, Check: check, Serve: serve}

// flags are the program's own flags; brokercmd adds the inbox's.
func flags(o *options) []brokercmd.Flag {
	return []brokercmd.Flag{
		brokercmd.List(&o.Brokers, "brokers", "seed brokers, comma separated").Env("KAFKA_BROKERS").Required(),
		brokercmd.Var(&o.topic, "topic", "", "topic to consume").Required().Logged(),
		brokercmd.Var(&o.Group, "group", "", "consumer group").Required().Logged(),
		brokercmd.Var(&o.DeadLetterTopic, "dlq", "", "dead-letter topic (default: TOPIC.dead)"),
		brokercmd.Var(&o.DeliveryLimit, "delivery-limit", kafka.DefaultDeliveryLimit, "failed accepts before a record is dead-lettered"),
	}
}

// check derives the defaults that depend on other flags.
func check(o *options) error {
	o.Topics, o.DeadLetterTopic = []string{o.topic}, cmp.Or(o.DeadLetterTopic, o.topic+".dead")
	return nil
}

// serve makes the consumer of the configuration the flags set.
func serve(o *options, s *brokercmd.Session) (brokercmd.Runner, error) {
	o.Scope, o.Logger = s.Scope(), s.Log
	o.Decode = func(r *kgo.Record) (inbox.Message, error) {
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
		m := s.Message(typ, r.Value)
		m.MessageID = id
		return m, nil
	}
	return kafka.NewConsumer(s.Client, o.Config)
}

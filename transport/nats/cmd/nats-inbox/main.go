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
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

func main() { program.Main() }

type options struct {
	pgnats.Config
	subject string
}

var program = brokercmd.Program[options]{Name: "nats-inbox", EventType: "the message subject", Flags: flags, Serve: serve}

// flags are the program's own flags; brokercmd adds the inbox's.
func flags(o *options) []brokercmd.Flag {
	return []brokercmd.Flag{
		brokercmd.Var(&o.URL, "nats-url", nats.DefaultURL, "NATS server URL").Env("NATS_URL"),
		brokercmd.Var(&o.Stream, "stream", "", "JetStream stream to consume").Required().Logged(),
		brokercmd.Var(&o.Durable, "durable", "pginbox", "durable consumer name").Logged(),
		brokercmd.Var(&o.subject, "subject", "", "consume only this subject (default: the whole stream)"),
		brokercmd.Var(&o.DeadLetterSubject, "dead-letter-subject", "", "subject for rejected and exhausted messages; a stream must capture it").Required(),
		brokercmd.Var(&o.DeliveryLimit, "delivery-limit", pgnats.DefaultDeliveryLimit, "deliveries before a message is dead-lettered"),
		brokercmd.Var(&o.Concurrency, "concurrency", pgnats.DefaultConcurrency, "messages accepted at once"),
	}
}

// serve makes the consumer of the configuration the flags set.
func serve(o *options, s *brokercmd.Session) (brokercmd.Runner, error) {
	o.Scope, o.Logger = s.Scope(), s.Log
	o.ConnectOptions = []nats.Option{nats.Name("nats-inbox")}
	if o.subject != "" {
		o.FilterSubjects = []string{o.subject}
	}
	o.Decode = func(m jetstream.Msg) (inbox.Message, error) {
		return s.Message(m.Subject(), m.Data()), nil
	}
	return pgnats.NewConsumer(s.Client, o.Config)
}

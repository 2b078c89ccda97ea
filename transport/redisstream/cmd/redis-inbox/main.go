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
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/internal/redisbase/rediscmd"
	"github.com/pginbox/pginbox/transport/redisstream"
)

func main() { program.Main() }

var program = brokercmd.Program[redisstream.Config]{Name: "redis-inbox", EventType: "the entry's type field", Flags: flags, Serve: serve}

// flags are the program's own flags; brokercmd adds the inbox's.
func flags(c *redisstream.Config) []brokercmd.Flag {
	return []brokercmd.Flag{
		rediscmd.ClientFlag(&c.Redis),
		brokercmd.Var(&c.Stream, "stream", "", "stream to consume").Required().Logged(),
		brokercmd.Var(&c.Group, "group", "pginbox", "consumer group").Logged(),
		brokercmd.Var(&c.Consumer, "name", "", "this instance's name in the group (default: hostname-pid)"),
		brokercmd.Var(&c.DeadLetterStream, "dead-letter-stream", "", "stream for rejected and exhausted entries").Required(),
		brokercmd.Var(&c.DeliveryLimit, "delivery-limit", redisstream.DefaultDeliveryLimit, "deliveries before an entry is dead-lettered"),
		brokercmd.Var(&c.ClaimIdle, "claim-idle", redisstream.DefaultClaimIdle, "how long an entry stays pending before it is claimed again"),
	}
}

// serve makes the consumer of the configuration the flags set.
func serve(c *redisstream.Config, s *brokercmd.Session) (brokercmd.Runner, error) {
	c.Scope, c.Logger = s.Scope(), s.Log
	c.Decode = func(m redis.XMessage) (inbox.Message, error) {
		eventType, _ := m.Values["type"].(string)
		if eventType == "" && s.EventType == "" {
			return inbox.Message{}, errors.New(`no event type: add a "type" field, or run with -event-type`)
		}
		payload, _ := m.Values["payload"].(string)
		if payload == "" {
			return inbox.Message{}, errors.New(`no "payload" field`)
		}
		return s.Message(eventType, []byte(payload)), nil
	}
	return redisstream.NewConsumer(s.Client, *c)
}

// Command mqtt-inbox accepts MQTT v5 messages (QoS 1) into a pginbox inbox:
// each message is acknowledged (PUBACK) only after its accept committed,
// redelivered by reconnecting when the database fails, and dead-lettered
// when it can never be accepted.
//
//	mqtt-inbox -database-url postgres://app@localhost/app -client-id orders-inbox \
//	    -topic 'orders/#' -dead-letter-topic dead/orders -tenant acme -source shop -consumer orders.projection.v1
//
// The scope comes from the flags (one tenant, or -global), never from the
// payload. The message ID is the "message-id" user property, the event type
// the topic unless -event-type is set, the payload the message (JSON). The
// broker password comes from MQTT_PASSWORD only. It runs until SIGINT or
// SIGTERM.
package main

import (
	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/mqtt"
)

func main() { program.Main() }

var program = brokercmd.Program[mqtt.Config]{Name: "mqtt-inbox", EventType: "the topic", Flags: flags, Serve: serve}

// flags are the program's own flags; brokercmd adds the inbox's.
func flags(c *mqtt.Config) []brokercmd.Flag {
	return []brokercmd.Flag{
		brokercmd.Var(&c.ServerURL, "mqtt-url", "mqtt://127.0.0.1:1883", "broker URL").Env("MQTT_URL"),
		brokercmd.Var(&c.Username, "username", "", "broker user name").Env("MQTT_USERNAME"),
		brokercmd.Secret(&c.Password, "MQTT_PASSWORD", "the broker password"),
		brokercmd.Var(&c.ClientID, "client-id", "", "stable client ID: the broker keeps unacknowledged messages in its session").Required().Logged(),
		brokercmd.List(&c.Topics, "topic", "topic filter(s) to subscribe to, comma-separated").Required().Logged(),
		brokercmd.Var(&c.DeadLetterTopic, "dead-letter-topic", "", "topic for rejected messages; keep a persistent session subscribed to it").Required(),
		brokercmd.Var(&c.DeliveryLimit, "delivery-limit", mqtt.DefaultDeliveryLimit, "failed accepts before a message is dead-lettered"),
	}
}

// serve makes the consumer of the configuration the flags set.
func serve(c *mqtt.Config, s *brokercmd.Session) (brokercmd.Runner, error) {
	c.Scope, c.Logger = s.Scope(), s.Log
	c.Decode = func(p *paho.Publish) (inbox.Message, error) {
		return s.Message(p.Topic, p.Payload), nil
	}
	return mqtt.NewConsumer(s.Client, *c)
}

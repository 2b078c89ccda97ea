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
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/mqtt"
)

func main() { brokercmd.Main(run) }

type options struct {
	inbox                        brokercmd.Inbox
	mqttURL, username, password  string
	clientID, topics, deadLetter string
	deliveryLimit                int
}

func (o *options) parse(args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("mqtt-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mqttURL, "mqtt-url", brokercmd.Or(getenv("MQTT_URL"), "mqtt://127.0.0.1:1883"), "broker URL (env MQTT_URL)")
	fs.StringVar(&o.username, "username", getenv("MQTT_USERNAME"), "broker user name (env MQTT_USERNAME)")
	o.password = getenv("MQTT_PASSWORD") // from the environment only, never the command line
	fs.StringVar(&o.clientID, "client-id", "", "stable client ID: the broker keeps unacknowledged messages in its session (required)")
	fs.StringVar(&o.topics, "topic", "", "topic filter(s) to subscribe to, comma-separated (required)")
	fs.StringVar(&o.deadLetter, "dead-letter-topic", "", "topic for rejected messages; keep a persistent session subscribed to it (required)")
	fs.IntVar(&o.deliveryLimit, "delivery-limit", mqtt.DefaultDeliveryLimit, "failed accepts before a message is dead-lettered")
	o.inbox.Register(fs, getenv, "the topic")
	if err := brokercmd.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case o.clientID == "":
		return errors.New("-client-id is required")
	case o.topics == "":
		return errors.New("-topic is required")
	case o.deadLetter == "":
		return errors.New("-dead-letter-topic is required")
	}
	return o.inbox.Check()
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var o options
	return brokercmd.Run("mqtt-inbox", stderr,
		func() error { return o.parse(args, getenv, stderr) },
		func(log *slog.Logger) error { return serve(ctx, &o, log) })
}

func serve(ctx context.Context, o *options, log *slog.Logger) error {
	pool, client, err := o.inbox.Open(ctx, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := mqtt.Config{
		ServerURL:       o.mqttURL,
		Scope:           o.inbox.Scope(),
		ClientID:        o.clientID,
		Topics:          strings.Split(o.topics, ","),
		DeadLetterTopic: o.deadLetter,
		DeliveryLimit:   o.deliveryLimit,
		Username:        o.username,
		Logger:          log,
		Decode: func(p *paho.Publish) (inbox.Message, error) {
			return o.inbox.Message(p.Topic, p.Payload), nil
		},
	}
	if o.password != "" {
		cfg.Password = []byte(o.password)
	}
	c, err := mqtt.NewConsumer(client, cfg)
	if err != nil {
		return err
	}
	log.Info("mqtt-inbox: consuming", "topics", cfg.Topics, "client_id", o.clientID, "consumer", o.inbox.Consumer)
	return c.Run(ctx)
}

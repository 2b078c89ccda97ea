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
// the topic unless -event-type is set, the payload the message (JSON). It
// runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/eclipse/paho.golang/paho"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/schema"
	"github.com/pginbox/pginbox/transport/mqtt"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

type options struct {
	mqttURL, databaseURL, username, password string
	clientID, topics, deadLetter             string
	tenant, source, consumer, eventType      string
	global                                   bool
	schemaVersion                            int
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("mqtt-inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mqttURL, "mqtt-url", or(getenv("MQTT_URL"), "mqtt://127.0.0.1:1883"), "broker URL (env MQTT_URL)")
	fs.StringVar(&o.databaseURL, "database-url", getenv("DATABASE_URL"), "PostgreSQL connection string (env DATABASE_URL)")
	fs.StringVar(&o.username, "username", getenv("MQTT_USERNAME"), "broker user name (env MQTT_USERNAME)")
	o.password = getenv("MQTT_PASSWORD") // from the environment only, never the command line
	fs.StringVar(&o.clientID, "client-id", "", "stable client ID: the broker keeps unacknowledged messages in its session (required)")
	fs.StringVar(&o.topics, "topic", "", "topic filter(s) to subscribe to, comma-separated (required)")
	fs.StringVar(&o.deadLetter, "dead-letter-topic", "", "topic for rejected messages; keep a persistent session subscribed to it (required)")
	fs.StringVar(&o.tenant, "tenant", "", "tenant ID every message belongs to (or -global)")
	fs.BoolVar(&o.global, "global", false, "messages belong to the global scope")
	fs.StringVar(&o.source, "source", "", "producer system, part of the identity (required)")
	fs.StringVar(&o.consumer, "consumer", "", "inbox consumer, e.g. orders.projection.v1 (required)")
	fs.StringVar(&o.eventType, "event-type", "", "event type of every message (default: the topic)")
	fs.IntVar(&o.schemaVersion, "schema-version", 1, "schema version of every message")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.databaseURL == "":
		return o, errors.New("-database-url (or DATABASE_URL) is required")
	case o.clientID == "":
		return o, errors.New("-client-id is required")
	case o.topics == "":
		return o, errors.New("-topic is required")
	case o.deadLetter == "":
		return o, errors.New("-dead-letter-topic is required")
	case o.tenant == "" && !o.global:
		return o, errors.New("-tenant or -global is required: the scope comes from configuration, never from the payload")
	case o.tenant != "" && o.global:
		return o, errors.New("-tenant and -global exclude each other")
	case o.source == "":
		return o, errors.New("-source is required")
	case o.consumer == "":
		return o, errors.New("-consumer is required")
	}
	return o, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o, err := parse(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqtt-inbox: %v (see -help)\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serve(ctx, o, log); err != nil {
		fmt.Fprintf(stderr, "mqtt-inbox: %v\n", err)
		return exitError
	}
	return exitOK
}

func serve(ctx context.Context, o options, log *slog.Logger) error {
	scope := inbox.Global()
	if !o.global {
		scope = inbox.Tenant(o.tenant)
	}
	cfg := mqtt.Config{
		ServerURL:       o.mqttURL,
		Scope:           scope,
		ClientID:        o.clientID,
		Topics:          strings.Split(o.topics, ","),
		DeadLetterTopic: o.deadLetter,
		Username:        o.username,
		Logger:          log,
		Decode: func(p *paho.Publish) (inbox.Message, error) {
			eventType := o.eventType
			if eventType == "" {
				eventType = p.Topic
			}
			return inbox.Message{
				Identity:      inbox.Identity{Source: o.source, Consumer: o.consumer},
				EventType:     eventType,
				SchemaVersion: o.schemaVersion,
				Payload:       json.RawMessage(p.Payload),
			}, nil
		},
	}
	if o.password != "" {
		cfg.Password = []byte(o.password)
	}
	pool, err := pgxpool.New(ctx, o.databaseURL)
	if err != nil {
		return fmt.Errorf("-database-url: %w", err)
	}
	defer pool.Close()
	if err := schema.Check(ctx, pool); err != nil {
		return err // says to run `inbox migrate up` when that is the problem
	}
	client, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{o.consumer}, Logger: log})
	if err != nil {
		return err
	}
	c, err := mqtt.NewConsumer(client, cfg)
	if err != nil {
		return err
	}
	log.Info("mqtt-inbox: consuming", "topics", cfg.Topics, "client_id", o.clientID, "consumer", o.consumer)
	return c.Run(ctx)
}

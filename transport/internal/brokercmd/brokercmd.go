// Package brokercmd is what every transport program (bullmq-inbox,
// kafka-inbox, mqtt-inbox, nats-inbox, rabbitmq-inbox, redis-inbox,
// sqs-inbox, webhook-inbox) shares: a Program declares only its broker's
// flags (a table of Flag) and how it consumes; the kit adds the inbox flags
// (database, scope, identity), the start-up checks (the schema is
// migrated), shutdown on SIGINT/SIGTERM and exit codes.
package brokercmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/pginbox/pginbox/inbox"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // start-up failed (database unreachable, schema not migrated, bad configuration)
	ExitUsage = 2 // bad flags
)

// Inbox holds the flags every program takes: where the inbox is, and the
// identity and type of the messages it accepts.
type Inbox struct {
	DatabaseURL   string // -database-url, or DATABASE_URL
	Tenant        string // -tenant: the scope of every message
	Global        bool   // -global: the global scope instead
	Source        string // -source: the producer system
	Consumer      string // -consumer: the inbox consumer
	EventType     string // -event-type, when offered; "" for the program's default
	SchemaVersion int    // -schema-version, when offered; 1 otherwise
}

// register adds the inbox flags to fs. DATABASE_URL comes from getenv
// unless -database-url is given; eventTypeDefault says where the event type
// comes from when -event-type is not set. With an empty eventTypeDefault the
// messages say their type and version themselves: -event-type and
// -schema-version are not offered.
func (in *Inbox) register(fs *flag.FlagSet, getenv func(string) string, eventTypeDefault string) {
	fs.StringVar(&in.DatabaseURL, "database-url", getenv("DATABASE_URL"), "PostgreSQL connection string (env DATABASE_URL)")
	fs.StringVar(&in.Tenant, "tenant", "", "tenant ID every message belongs to (this or -global is required)")
	fs.BoolVar(&in.Global, "global", false, "messages belong to the global scope (this or -tenant is required)")
	fs.StringVar(&in.Source, "source", "", "producer system, part of the identity (required)")
	fs.StringVar(&in.Consumer, "consumer", "", "inbox consumer, e.g. orders.projection.v1 (required)")
	in.SchemaVersion = 1
	if eventTypeDefault != "" {
		fs.StringVar(&in.EventType, "event-type", "", "event type of every message (default: "+eventTypeDefault+")")
		fs.IntVar(&in.SchemaVersion, "schema-version", 1, "schema version of every message")
	}
}

// check reports the first missing or contradictory inbox flag.
func (in *Inbox) check() error {
	switch {
	case in.DatabaseURL == "":
		return errors.New("-database-url (or DATABASE_URL) is required")
	case in.Tenant == "" && !in.Global:
		return errors.New("-tenant or -global is required: the scope comes from configuration, never from a message")
	case in.Tenant != "" && in.Global:
		return errors.New("-tenant and -global exclude each other")
	case in.Source == "":
		return errors.New("-source is required")
	case in.Consumer == "":
		return errors.New("-consumer is required")
	}
	return nil
}

// Scope is -tenant's scope, or the global scope with -global.
func (in *Inbox) Scope() inbox.Scope {
	if in.Global {
		return inbox.Global()
	}
	return inbox.Tenant(in.Tenant)
}

// Message is a message of the flags' identity (the scope is the adapter's
// Config.Scope) and type: -event-type, or eventType when that is empty.
func (in *Inbox) Message(eventType string, payload []byte) inbox.Message {
	if in.EventType != "" {
		eventType = in.EventType
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: in.Source, Consumer: in.Consumer},
		EventType:     eventType,
		SchemaVersion: in.SchemaVersion,
		Payload:       payload,
	}
}

// parse parses args into fs and refuses arguments after the flags.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// run runs a program: parse reads the flags, serve runs until its context
// ends. Errors are printed to stderr as "name: error"; the result is the
// exit code.
func run(name string, stderr io.Writer, parse func() error, serve func(*slog.Logger) error) int {
	err := parse()
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v (see -help)\n", name, err)
		return ExitUsage
	}
	if err := serve(slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitError
	}
	return ExitOK
}

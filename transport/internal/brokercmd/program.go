package brokercmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/schema"
)

// Program is a transport program, declared by what is its broker's: its
// flags and how it consumes. O holds its options; the flags set them.
type Program[O any] struct {
	// Name is the program's name, in its errors, usage and logs
	// ("nats-inbox").
	Name string

	// EventType says where a message's event type comes from when
	// -event-type is not set ("the message subject"). Empty when the
	// messages carry their type and version themselves: the program then
	// has no -event-type or -schema-version.
	EventType string

	// Flags is the table of the program's own flags on o. A missing
	// required flag is reported before the inbox flags, in table order.
	Flags func(o *O) []Flag

	// Check, when set, runs once the flags are read and the required ones
	// found: defaults derived from other flags, rules between flags.
	Check func(o *O) error

	// Serve returns what consumes the broker into s.Client, for Run to run
	// until its context ends; s says the messages' scope and identity.
	Serve func(o *O, s *Session) (Runner, error)
}

// Runner consumes until ctx ends: every adapter's Consumer.
type Runner interface {
	// Run consumes until ctx ends.
	Run(ctx context.Context) error
}

// RunFunc is a Runner that is a function (an HTTP server).
type RunFunc func(ctx context.Context) error

// Run calls f.
func (f RunFunc) Run(ctx context.Context) error { return f(ctx) }

// Main runs the program with the command line, the environment and stderr,
// until SIGINT or SIGTERM, then exits with its exit code.
func (p Program[O]) Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := p.Run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs the program with args and the environment getenv until ctx ends,
// and returns its exit code. Errors go to stderr as "name: error", and so
// do the logs.
func (p Program[O]) Run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o := new(O)
	s := &Session{}
	flags := p.Flags(o)
	return run(p.Name, stderr,
		func() error { return p.parse(flags, o, s, args, getenv, stderr) },
		func(log *slog.Logger) error {
			s.Log = log
			defer s.end()
			r, err := p.start(ctx, o, s, flags)
			if err != nil {
				return err
			}
			log.Info(p.Name+": started", append(s.logged, "consumer", s.Consumer, "scope", s.Scope())...)
			return r.Run(ctx)
		})
}

// start dials what the flags dial, opens the inbox and returns the
// consumer.
func (p Program[O]) start(ctx context.Context, o *O, s *Session, flags []Flag) (Runner, error) {
	for _, f := range flags {
		if f.dial != nil {
			if err := f.dial(ctx, s); err != nil {
				return nil, err
			}
		}
	}
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	return p.Serve(o, s)
}

// parse reads the program's flags and the inbox flags, and checks them.
func (p Program[O]) parse(flags []Flag, o *O, s *Session, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, f := range flags {
		f.bind(fs, getenv, f)
	}
	s.Inbox.register(fs, getenv, p.EventType)
	if err := parse(fs, args); err != nil {
		return err
	}
	for _, f := range flags {
		if err := f.check(); err != nil {
			return err
		}
		if f.logged {
			s.logged = append(s.logged, f.name, f.value())
		}
	}
	if p.Check != nil {
		if err := p.Check(o); err != nil {
			return err
		}
	}
	return s.Inbox.check()
}

// Session is one run of a program: the inbox flags, the logger, the inbox
// client, and what closes when the program ends.
type Session struct {
	Inbox
	Log *slog.Logger // the program's logger
	// Client accepts into the inbox, for -consumer (set for Serve).
	Client *inbox.Client

	logged  []any
	closers []func() error
}

// open connects to the database, checks that the pginbox schema is there
// and makes the inbox client. The connections close when the program ends.
func (s *Session) open(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("-database-url: %w", err)
	}
	s.Defer(closer(pool.Close))
	if err := schema.Check(ctx, pool); err != nil {
		return err // says to run `inbox migrate up` when that is the problem
	}
	s.Client, err = inbox.NewClient(pool, inbox.Config{Consumers: []string{s.Consumer}, Logger: s.Log})
	return err
}

// Defer closes c when the program ends, after what was deferred later.
func (s *Session) Defer(c io.Closer) { s.closers = append(s.closers, c.Close) }

// end closes what was deferred, last first.
func (s *Session) end() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil && s.Log != nil {
			s.Log.Warn("closing at exit failed", "err", err)
		}
	}
}

// closer makes a Close without an error an io.Closer.
type closer func()

func (c closer) Close() error { c(); return nil }

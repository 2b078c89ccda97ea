package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
)

// Consumer moves messages from a durable JetStream pull consumer into the
// inbox. Create it with New and run it with Run.
type Consumer struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	client *inbox.Client
	cfg    Config
	log    *slog.Logger

	// lastErr remembers why a message (by stream sequence) was last retried,
	// for the dead letter written when its deliveries run out.
	mu      sync.Mutex
	lastErr map[uint64]string
}

// maxRemembered bounds lastErr; past it, reasons are forgotten (the dead
// letter then says the last error is unknown).
const maxRemembered = 10000

// New returns a Consumer reading through nc. nc must reconnect forever
// (nats.MaxReconnects(-1)): the Consumer then rides out broker restarts
// and network failures, re-issuing its pulls after every reconnect.
func New(nc *nats.Conn, client *inbox.Client, cfg Config) (*Consumer, error) {
	if nc == nil {
		return nil, errors.New("pginbox/nats: New: the NATS connection is nil")
	}
	if client == nil {
		return nil, errors.New("pginbox/nats: New: the inbox client is nil")
	}
	if nc.Opts.MaxReconnect >= 0 {
		return nil, fmt.Errorf("pginbox/nats: New: the connection stops reconnecting after %d attempts; connect with nats.MaxReconnects(-1) so the consumer outlives broker outages", nc.Opts.MaxReconnect)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("pginbox/nats: Config.%w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("pginbox/nats: New: %w", err)
	}
	return &Consumer{
		nc:      nc,
		js:      js,
		client:  client,
		cfg:     cfg,
		log:     cfg.Logger.With("stream", cfg.Stream, "durable", cfg.Durable),
		lastErr: make(map[uint64]string),
	}, nil
}

// ErrStreamNotFound is returned by Run when Config.Stream does not exist.
var ErrStreamNotFound = errors.New("pginbox/nats: stream not found")

// Run consumes until ctx is cancelled, then stops pulling, finishes the
// messages it holds and returns nil. Lost connections and server errors are
// logged and retried with backoff; only a missing stream (ErrStreamNotFound)
// or a closed connection ends Run early.
func (c *Consumer) Run(ctx context.Context) error {
	adv, err := c.subscribeAdvisories()
	if err != nil {
		return err
	}
	defer func() { _ = adv.Unsubscribe() }()

	wait := backoffStart
	for {
		started := time.Now()
		err := c.consume(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrStreamNotFound) || c.nc.IsClosed() {
			return err
		}
		if time.Since(started) > backoffMax {
			wait = backoffStart // it ran for a while: start over
		}
		c.log.Warn("pginbox/nats: consuming failed; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, backoffMax)
	}
}

// Backoff between failed attempts to (re)start consuming.
const (
	backoffStart = 100 * time.Millisecond
	backoffMax   = 5 * time.Second
)

// consume creates or updates the durable consumer and handles its messages
// until the iterator fails or ctx is cancelled (then it drains what is
// buffered and returns nil).
func (c *Consumer) consume(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cons, err := c.js.CreateOrUpdateConsumer(cctx, c.cfg.Stream, jetstream.ConsumerConfig{
		Durable:        c.cfg.Durable,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.cfg.AckWait,
		MaxDeliver:     c.cfg.MaxDeliver,
		FilterSubjects: c.cfg.FilterSubjects,
	})
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: %q: create it, or fix Config.Stream", ErrStreamNotFound, c.cfg.Stream)
	}
	if err != nil {
		return fmt.Errorf("pginbox/nats: creating consumer %q: %w", c.cfg.Durable, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(c.cfg.Concurrency))
	if err != nil {
		return fmt.Errorf("pginbox/nats: pulling from consumer %q: %w", c.cfg.Durable, err)
	}
	defer it.Stop()
	stopDrain := context.AfterFunc(ctx, it.Drain) // Next returns what is buffered, then ErrMsgIteratorClosed
	defer stopDrain()

	slots := make(chan struct{}, c.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("pginbox/nats: receiving: %w", err)
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			c.handle(ctx, m)
		})
	}
}

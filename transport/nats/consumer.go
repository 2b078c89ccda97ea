package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/internal/service"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Consumer moves messages from a durable JetStream pull consumer into the
// inbox. Create it with New and run it with Run.
type Consumer struct {
	runner settle.Runner // lets Close end Run
	acc    Accepter
	cfg    Config
	log    *slog.Logger

	// Set by Run for its duration.
	nc *nats.Conn
	js jetstream.JetStream

	// lastErr remembers why a message (by stream sequence) was last retried,
	// for the dead letter written when its deliveries run out.
	lastErr settle.LastErrors[uint64]

	// streamLoss is found once Run created the durable consumer: a missing
	// stream is then a loss, not a configuration error.
	streamLoss  settle.Loss
	streamsLost atomic.Int64
}

// Stats counts what a Consumer saw since it was created.
type Stats struct {
	// StreamsLost is how many times the stream disappeared after Run had
	// consumed from it (each reported as ErrStreamLost).
	StreamsLost int64
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats { return Stats{StreamsLost: c.streamsLost.Load()} }

// NewConsumer returns a consumer that accepts through acc (an *inbox.Client).
// It connects in Run.
func NewConsumer(acc Accepter, cfg Config) (*Consumer, error) {
	cfg, err := cfgerr.Prepare("pginbox/nats: NewConsumer", acc, cfg, Config.withDefaults, Config.validate)
	if err != nil {
		return nil, err
	}
	c := &Consumer{
		acc: acc,
		cfg: cfg,
		log: cfg.Logger.With("stream", cfg.Stream, "durable", cfg.Durable),
	}
	c.streamLoss = settle.Loss{Log: c.log, Message: "pginbox/nats: stream lost", OnError: cfg.OnError, Count: &c.streamsLost}
	return c, nil
}

// ErrStreamNotFound is returned by Run when Config.Stream does not exist
// when Run starts.
var ErrStreamNotFound = errors.New("pginbox/nats: stream not found")

// ErrStreamLost is reported (Config.OnError, an Error log line and
// Stats.StreamsLost) when Config.Stream disappears after Run consumed from
// it: deleted, or lost with a server that kept it in memory. What it held and
// had not delivered is gone. Run keeps going and consumes again once the
// stream exists again; recreate it (and find out what removed it).
var ErrStreamLost = errors.New("pginbox/nats: the stream disappeared after the consumer had consumed from it")

// Close ends a Run in progress and waits for it to return (Run returns nil,
// as after a cancel); a later Run returns at once. It returns nil.
func (c *Consumer) Close() error { return c.runner.Close() }

// Run connects and consumes until ctx is cancelled, then stops pulling,
// finishes the messages it holds, closes its connection and returns nil.
// Lost connections and server errors are logged and retried with backoff;
// only an invalid URL or a stream missing at the start (ErrStreamNotFound)
// end Run early. A stream that disappears later is reported as
// ErrStreamLost and waited for.
// Run once at a time.
func (c *Consumer) Run(ctx context.Context) error {
	ctx, end := c.runner.Begin(ctx)
	defer end()
	opts := append([]nats.Option{
		nats.Name("pginbox " + c.cfg.Durable),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.log.Warn("pginbox/nats: disconnected; reconnecting", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { c.log.Info("pginbox/nats: reconnected", "url", nc.ConnectedUrl()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.log.Warn("pginbox/nats: connection error", "err", err)
		}),
	}, c.cfg.ConnectOptions...)
	opts = append(opts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	nc, err := nats.Connect(c.cfg.URL, opts...)
	if err != nil {
		return fmt.Errorf("pginbox/nats: connecting to %s: %w", c.cfg.URL, err)
	}
	defer func() {
		_ = nc.FlushTimeout(2 * time.Second) // the last acks and terms
		nc.Close()
	}()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("pginbox/nats: %w", err)
	}
	c.nc, c.js = nc, js

	adv, err := c.subscribeAdvisories()
	if err != nil {
		return err
	}
	defer func() { _ = adv.Unsubscribe() }()

	retry := service.Backoff{Min: backoffStart, Max: backoffMax, Reset: backoffMax}
	for {
		retry.Start()
		err := c.consume(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrStreamNotFound) {
			if !c.streamLoss.Seen() {
				return err
			}
			lost := fmt.Errorf("%w: %q: what it held and had not delivered is gone; recreate it, Run consumes again once it exists: %w", ErrStreamLost, c.cfg.Stream, err)
			if c.streamLoss.Report(ctx, lost) {
				err = lost
			}
		}
		wait := retry.Failed()
		c.log.Warn("pginbox/nats: consuming failed; retrying", "err", err, "in", wait)
		if !service.Sleep(ctx, wait) {
			return nil
		}
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
		MaxDeliver:     c.cfg.DeliveryLimit,
		FilterSubjects: c.cfg.FilterSubjects,
	})
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: %q: create it, or fix Config.Stream", ErrStreamNotFound, c.cfg.Stream)
	}
	if err != nil {
		return fmt.Errorf("pginbox/nats: creating consumer %q: %w", c.cfg.Durable, err)
	}
	c.streamLoss.Found()
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

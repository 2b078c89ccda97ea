package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Reconnect backoff: doubles from the first to the last value; a session
// that lasted longer than reconnectReset starts over from the first.
const (
	reconnectMin   = 250 * time.Millisecond
	reconnectMax   = 10 * time.Second
	reconnectReset = 30 * time.Second
	dialTimeout    = 10 * time.Second
)

// Consumer consumes one queue into the inbox. Create it with NewConsumer and
// call Run.
type Consumer struct {
	acc Accepter
	cfg Config

	acked, requeued, deadLettered, connects atomic.Int64
	warnOnce                                sync.Once
}

// Stats counts what a Consumer did since it was created.
type Stats struct {
	Acked        int64 // deliveries acked after Accept (accepted or duplicate)
	Requeued     int64 // deliveries nacked with requeue (retry)
	DeadLettered int64 // deliveries republished to the dead-letter exchange, then acked
	Connects     int64 // successful connects, the first included
}

// NewConsumer returns a consumer that accepts through acc (an *inbox.Client).
func NewConsumer(acc Accepter, cfg Config) (*Consumer, error) {
	if acc == nil {
		return nil, fmt.Errorf("pginbox/rabbitmq: NewConsumer: accepter is nil: pass an *inbox.Client")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Consumer{acc: acc, cfg: cfg}, nil
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats {
	return Stats{Acked: c.acked.Load(), Requeued: c.requeued.Load(), DeadLettered: c.deadLettered.Load(), Connects: c.connects.Load()}
}

// Run consumes until ctx is done, reconnecting with backoff whenever the
// broker or the connection goes away. On shutdown it stops consuming, lets
// the deliveries in hand finish (ack, nack or dead letter), and returns nil.
// Deliveries never acked return to the queue when the channel closes.
func (c *Consumer) Run(ctx context.Context) error {
	delay := reconnectMin
	for {
		started := time.Now()
		err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > reconnectReset {
			delay = reconnectMin
		}
		c.cfg.Logger.WarnContext(ctx, "pginbox/rabbitmq: connection lost, reconnecting", "queue", c.cfg.Queue, "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, reconnectMax)
	}
}

// session runs one connection: connect, set up, consume until the connection
// or channel closes or ctx is done.
func (c *Consumer) session(ctx context.Context) error {
	conn, err := amqp.DialConfig(c.cfg.URL, amqp.Config{Dial: amqp.DefaultDial(dialTimeout)})
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening a channel: %w", err)
	}
	if c.cfg.Setup != nil {
		if err := c.cfg.Setup(ch); err != nil {
			return fmt.Errorf("Config.Setup: %w", err)
		}
	}
	if err := ch.Qos(c.cfg.Prefetch, 0, false); err != nil {
		return fmt.Errorf("basic.qos: %w", err)
	}
	dl, err := newDeadLetterer(conn, c.cfg.DeadLetterExchange, c.cfg.DeadLetterRoutingKey)
	if err != nil {
		return err
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	tag := fmt.Sprintf("pginbox-%d", time.Now().UnixNano())
	deliveries, err := ch.Consume(c.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consuming queue %q (does it exist? declare it in Config.Setup): %w", c.cfg.Queue, err)
	}
	c.connects.Add(1)
	c.cfg.Logger.InfoContext(ctx, "pginbox/rabbitmq: consuming", "queue", c.cfg.Queue, "prefetch", c.cfg.Prefetch, "concurrency", c.cfg.Concurrency)

	// Workers end when the library closes deliveries: after a cancel-ok, or
	// when the channel or connection closes. sessCtx ends their retry waits
	// early when the session is over.
	sessCtx, endSession := context.WithCancel(ctx)
	defer endSession()
	var wg sync.WaitGroup
	for range c.cfg.Concurrency {
		wg.Go(func() {
			for d := range deliveries {
				c.handle(sessCtx, dl, d)
			}
		})
	}
	var cause error
	select {
	case <-ctx.Done():
		// Stop new deliveries; the ones in hand finish on the open channel.
		if err := ch.Cancel(tag, false); err != nil {
			endSession()
		}
	case e := <-closed:
		cause = errors.New("channel closed")
		if e != nil {
			cause = e
		}
		endSession()
	}
	wg.Wait()
	return cause
}

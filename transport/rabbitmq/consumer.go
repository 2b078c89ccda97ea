package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/internal/service"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/settle"
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
	runner settle.Runner // lets Close end Run
	acc    Accepter
	cfg    Config

	acked, requeued, deadLettered, connects, queuesLost atomic.Int64
	warnOnce                                            sync.Once

	queueLoss settle.Loss // found each time Run starts consuming the queue
}

// ErrQueueLost is reported (Config.OnError, an Error log line and
// Stats.QueuesLost) when the queue disappears after Run consumed from it:
// deleted, or a transient queue lost in a broker restart. The messages it
// held are gone. Run keeps reconnecting and consumes again once the queue
// exists (Config.Setup can declare it again); find out what removed it.
var ErrQueueLost = errors.New("pginbox/rabbitmq: the queue disappeared after the consumer had consumed from it")

// errQueueGone is a session's end because its queue does not exist.
var errQueueGone = errors.New("the queue does not exist")

// Stats counts what a Consumer did since it was created.
type Stats struct {
	Acked        int64 // deliveries acked after Accept (accepted or duplicate)
	Requeued     int64 // deliveries nacked with requeue (retry)
	DeadLettered int64 // deliveries republished to the dead-letter exchange, then acked
	Connects     int64 // successful connects, the first included
	QueuesLost   int64 // times the queue disappeared after Run consumed from it (ErrQueueLost)
}

// NewConsumer returns a consumer that accepts through acc (an *inbox.Client).
func NewConsumer(acc Accepter, cfg Config) (*Consumer, error) {
	cfg, err := cfgerr.Prepare("pginbox/rabbitmq: NewConsumer", acc, cfg, Config.withDefaults, Config.validate)
	if err != nil {
		return nil, err
	}
	c := &Consumer{acc: acc, cfg: cfg}
	c.queueLoss = settle.Loss{Log: cfg.Logger.With("queue", cfg.Queue), Message: "pginbox/rabbitmq: queue lost", OnError: cfg.OnError, Count: &c.queuesLost}
	return c, nil
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats {
	return Stats{Acked: c.acked.Load(), Requeued: c.requeued.Load(), DeadLettered: c.deadLettered.Load(), Connects: c.connects.Load(), QueuesLost: c.queuesLost.Load()}
}

// Close ends a Run in progress and waits for it to return (Run returns nil,
// as after a cancel); a later Run returns at once. It returns nil.
func (c *Consumer) Close() error { return c.runner.Close() }

// Run consumes until ctx is done, reconnecting with backoff whenever the
// broker or the connection goes away. On shutdown it stops consuming, lets
// the deliveries in hand finish (ack, nack or dead letter), and returns nil.
// Deliveries never acked return to the queue when the channel closes.
func (c *Consumer) Run(ctx context.Context) error {
	ctx, end := c.runner.Begin(ctx)
	defer end()
	retry := service.Backoff{Min: reconnectMin, Max: reconnectMax, Reset: reconnectReset}
	for {
		retry.Start()
		err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errQueueGone) {
			c.queueLoss.Report(ctx, fmt.Errorf("%w: %q: the messages it held are gone; declare it again (Config.Setup runs at every reconnect), Run consumes again once it exists: %w", ErrQueueLost, c.cfg.Queue, err))
		}
		delay := retry.Failed()
		c.cfg.Logger.WarnContext(ctx, "pginbox/rabbitmq: connection lost, reconnecting", "queue", c.cfg.Queue, "err", err, "in", delay)
		if !service.Sleep(ctx, delay) {
			return nil
		}
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
	cancelled := ch.NotifyCancel(make(chan string, 1))
	tag := fmt.Sprintf("pginbox-%d", time.Now().UnixNano())
	deliveries, err := ch.Consume(c.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		if amqpErr := (*amqp.Error)(nil); errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound {
			err = fmt.Errorf("%w: %w", errQueueGone, err)
		}
		return fmt.Errorf("consuming queue %q (does it exist? declare it in Config.Setup): %w", c.cfg.Queue, err)
	}
	c.connects.Add(1)
	c.queueLoss.Found()
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
	case <-cancelled:
		// The broker cancelled the consumer: the queue was deleted (or
		// failed over). deliveries is closed; the workers finish.
		cause = errors.New("the broker cancelled the consumer")
		if queueMissing(conn, c.cfg.Queue) {
			cause = fmt.Errorf("%w: the broker cancelled the consumer", errQueueGone)
		}
		endSession()
	}
	wg.Wait()
	return cause
}

// queueMissing reports whether the broker says queue does not exist.
func queueMissing(conn *amqp.Connection, queue string) bool {
	ch, err := conn.Channel()
	if err != nil {
		return false
	}
	_, err = ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err == nil {
		_ = ch.Close()
		return false
	}
	amqpErr := (*amqp.Error)(nil)
	return errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound
}

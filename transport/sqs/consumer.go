package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pginbox/pginbox/internal/service"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Consumer moves messages from an SQS queue into the inbox. Create it with
// NewConsumer and run it with Run.
type Consumer struct {
	runner settle.Runner // lets Close end Run
	acc    Accepter
	cfg    Config
	log    *slog.Logger

	acked, deadLettered, retries, queuesLost atomic.Int64
}

// Stats counts what a Consumer did since it was created.
type Stats struct {
	Acked        int64 // messages deleted after Accept (accepted or duplicate)
	DeadLettered int64 // messages sent to DeadLetterQueueURL, then deleted
	Retries      int64 // failed accepts: the message hidden for the retry delay
	QueuesLost   int64 // the queue disappeared after Run had received from it (each reported as ErrQueueLost)
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats {
	return Stats{Acked: c.acked.Load(), DeadLettered: c.deadLettered.Load(), Retries: c.retries.Load(), QueuesLost: c.queuesLost.Load()}
}

// NewConsumer returns a consumer that accepts through acc (an *inbox.Client).
func NewConsumer(acc Accepter, cfg Config) (*Consumer, error) {
	cfg, err := cfgerr.Prepare("pginbox/sqs: NewConsumer", acc, cfg, Config.withDefaults, Config.validate)
	if err != nil {
		return nil, err
	}
	return &Consumer{acc: acc, cfg: cfg, log: cfg.Logger.With("queue", cfg.QueueURL)}, nil
}

// ErrQueueNotFound is returned by Run when Config.QueueURL names no queue
// when Run starts: a configuration error.
var ErrQueueNotFound = errors.New("pginbox/sqs: queue not found")

// ErrQueueLost is reported (Config.OnError, an Error log line and
// Stats.QueuesLost) when the queue disappears after Run received from it:
// deleted, or lost with a server that kept it in memory. What it held is
// gone. Run keeps going and receives again once the queue exists again;
// recreate it (and find out what removed it). It wraps ErrQueueNotFound.
var ErrQueueLost = errors.New("pginbox/sqs: the queue disappeared after the consumer had received from it")

// Close ends a Run in progress and waits for it to return (Run returns nil,
// as after a cancel); a later Run returns at once. It returns nil.
func (c *Consumer) Close() error { return c.runner.Close() }

// Backoff between failed receives.
const (
	backoffStart = 100 * time.Millisecond
	backoffMax   = 5 * time.Second
)

// Run receives and accepts messages until ctx is cancelled, then finishes
// the messages it holds and returns nil. Failed receives are logged and
// retried with backoff; only a queue missing at the start
// (ErrQueueNotFound) ends Run early. A queue that disappears later is
// reported as ErrQueueLost and waited for. Run once at a time.
func (c *Consumer) Run(ctx context.Context) error {
	ctx, end := c.runner.Begin(ctx)
	defer end()
	slots := make(chan struct{}, c.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	retry := service.Backoff{Min: backoffStart, Max: backoffMax}
	// Found after each receive that succeeded: the queue existed.
	loss := &settle.Loss{Log: c.log, Message: "pginbox/sqs: queue lost", OnError: c.cfg.OnError, Count: &c.queuesLost}
	for ctx.Err() == nil {
		// Ask only for as many messages as there are free slots, so none
		// waits hidden in a buffer while its visibility timeout runs.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		free := 1
		for free < min(c.cfg.Concurrency, 10) && len(slots) < cap(slots) {
			slots <- struct{}{}
			free++
		}
		msgs, err := c.receive(ctx, free)
		for range free - len(msgs) {
			<-slots
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrQueueNotFound) {
			if !loss.Seen() {
				return err
			}
			loss.Report(ctx, fmt.Errorf("%w: what it held is gone; recreate it, Run receives again once it exists: %w", ErrQueueLost, err))
		}
		if err != nil {
			wait := retry.Failed()
			c.log.Warn("pginbox/sqs: receiving failed; retrying", "err", err, "in", wait)
			if !service.Sleep(ctx, wait) {
				return nil
			}
			continue
		}
		retry.Succeeded()
		loss.Found()
		for _, m := range msgs {
			wg.Go(func() {
				defer func() { <-slots }()
				c.handle(ctx, m)
			})
		}
	}
	return nil
}

// receive long-polls for up to n messages.
func (c *Consumer) receive(ctx context.Context, n int) ([]types.Message, error) {
	out, err := c.cfg.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(c.cfg.QueueURL),
		MaxNumberOfMessages:         int32(n),
		VisibilityTimeout:           seconds(c.cfg.VisibilityTimeout),
		WaitTimeSeconds:             seconds(c.cfg.WaitTime),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		if queueMissing(err) {
			return nil, fmt.Errorf("%w: %s: create it, or fix Config.QueueURL: %w", ErrQueueNotFound, c.cfg.QueueURL, err)
		}
		return nil, fmt.Errorf("pginbox/sqs: receiving from %s: %w", c.cfg.QueueURL, err)
	}
	return out.Messages, nil
}

package redisbase

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/service"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Accepter is the part of *inbox.Client a consumer uses.
type Accepter interface {
	// Accept stores msg durably: inbox.Client.Accept.
	Accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error)
}

// Backoff after a failed Redis call.
const (
	backoffStart = 100 * time.Millisecond
	backoffMax   = 5 * time.Second
)

// Worker is the default name a consumer has in Redis: "<hostname>-<pid>".
func Worker() string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid())
}

// Base is the part of a consumer on Redis that is not the broker's data
// model: Close, the retry loop, and the accept that settles what it took.
// Fill in the exported fields; the zero value of the rest is ready.
type Base struct {
	Acc Accepter // the inbox the consumer accepts into
	// Pkg starts the log messages ("pginbox/redisstream").
	Pkg string
	// DeliveryLimit is Config.DeliveryLimit: past it, a delivery is
	// rejected without an accept.
	DeliveryLimit int64
	// AcceptTimeout, when set, bounds an accept within Handle's context.
	AcceptTimeout time.Duration
	// Words say what settling means in the broker's terms, for the logs.
	Words Words

	runner settle.Runner
	// lastErr remembers why a delivery was last retried, for its dead
	// letter when its deliveries run out.
	lastErr settle.LastErrors[string]
}

// Words name the broker's settling in log lines and errors.
type Words struct {
	Ack      string // "XACK"
	Reject   string // "dead-lettering"
	Retry    string // what becomes of a delivery left unsettled: "the entry stays pending and is claimed again"
	Rejected string // "moved to the dead-letter stream"
}

// Begin starts a Run: the returned context ends when ctx does or Close is
// called; Run defers end.
func (b *Base) Begin(ctx context.Context) (_ context.Context, end func()) { return b.runner.Begin(ctx) }

// Close ends a Run in progress and waits for it to return (Run returns nil,
// as after a cancel); a later Run returns at once. It returns nil.
func (b *Base) Close() error { return b.runner.Close() }

// Loop runs step until ctx ends, then returns nil. After a failed step it
// calls failed (when set), logs the error and waits, from 100ms doubling up
// to 5s while the steps keep failing.
func (b *Base) Loop(ctx context.Context, log *slog.Logger, step func(context.Context) error, failed func(error)) error {
	retry := service.Backoff{Min: backoffStart, Max: backoffMax}
	for ctx.Err() == nil {
		err := step(ctx)
		if err == nil {
			retry.Succeeded()
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if failed != nil {
			failed(err)
		}
		wait := retry.Failed()
		log.Warn(b.Pkg+": Redis call failed; retrying", "err", err, "in", wait)
		service.Sleep(ctx, wait)
	}
	return nil
}

// Delivery is one entry or job a consumer took, and how the broker settles
// it.
type Delivery struct {
	ID        string       // entry or job ID
	Delivered int64        // deliveries so far, this one included
	Log       *slog.Logger // logs with the delivery's attributes

	// Decode maps it to the message to accept, scope and message ID set.
	Decode func() (inbox.Message, error)
	// Ack settles it as accepted.
	Ack func(ctx context.Context, res inbox.AcceptResult) error
	// Reject settles it as refused, to the dead letter with the reason.
	Reject func(ctx context.Context, reason string, cause error) error
}

// Handle accepts d and settles it as inbox.ActionFor says: Ack after an
// accept (or a duplicate); nothing for a retry (Redis delivers it again);
// Reject with the reason for a message the inbox refuses, one Decode fails
// on, or one delivered more than DeliveryLimit times. ctx bounds it all;
// end it only when the work may be dropped.
func (b *Base) Handle(ctx context.Context, d Delivery) {
	if d.Delivered > b.DeliveryLimit {
		cause := fmt.Errorf("not accepted after %d deliveries (DeliveryLimit); last error: %s", d.Delivered-1, b.lastErr.Recall(d.ID))
		b.reject(ctx, d, settle.ReasonDeliveryLimit, cause)
		return
	}
	msg, err := d.Decode()
	if err != nil {
		b.reject(ctx, d, settle.ReasonDecode, err)
		return
	}
	log := d.Log.With("message_id", msg.MessageID)
	res, err := b.accept(ctx, msg)
	switch inbox.ActionFor(err) {
	case inbox.ActionAck:
		b.lastErr.Forget(d.ID)
		if err := d.Ack(ctx, res); err != nil {
			// Delivered again, its next accept is a Duplicate.
			log.Warn(b.Pkg+": "+b.Words.Ack+" failed; "+b.Words.Retry, "err", err)
			return
		}
		log.Debug(b.Pkg+": accepted", "outcome", res.Outcome, "receipt", res.ID)
	case inbox.ActionRetry:
		b.lastErr.Remember(d.ID, err)
		log.Warn(b.Pkg+": accept failed; "+b.Words.Retry, "err", err)
	case inbox.ActionReject:
		b.reject(ctx, d, settle.Reason(err), err)
	}
}

func (b *Base) accept(ctx context.Context, msg inbox.Message) (inbox.AcceptResult, error) {
	if b.AcceptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.AcceptTimeout)
		defer cancel()
	}
	return b.Acc.Accept(ctx, msg)
}

// reject settles d as refused; when that fails it stays unsettled, and its
// dead letter is tried again at its next delivery.
func (b *Base) reject(ctx context.Context, d Delivery, reason string, cause error) {
	if err := d.Reject(ctx, reason, cause); err != nil {
		b.lastErr.Remember(d.ID, fmt.Errorf("%s failed: %w", b.Words.Reject, err))
		d.Log.Error(b.Pkg+": "+b.Words.Reject+" failed; "+b.Words.Retry, "reason", reason, "cause", cause, "err", err)
		return
	}
	b.lastErr.Forget(d.ID)
	d.Log.Warn(b.Pkg+": "+b.Words.Rejected, "reason", reason, "err", cause)
}

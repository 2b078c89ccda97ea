package rabbitmq

import (
	"context"
	"errors"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/inbox"
)

// Dead-letter reasons, in the x-pginbox-reason header.
const (
	ReasonConflict      = "conflict"
	ReasonInvalid       = "invalid"
	ReasonDecode        = "decode"
	ReasonDeliveryLimit = "delivery_limit"
)

// handle accepts one delivery and settles it: ack, nack with requeue, or
// dead letter. ctx ends with the session.
func (c *Consumer) handle(ctx context.Context, dl *deadLetterer, d amqp.Delivery) {
	log := c.cfg.Logger.With("queue", c.cfg.Queue, "message_id", d.MessageId, "delivery_tag", d.DeliveryTag)
	msg, err := c.cfg.Decode(d)
	if err != nil {
		c.deadLetter(ctx, dl, d, ReasonDecode, err, "")
		return
	}
	msg.Scope = c.cfg.Scope
	// Accept finishes even when shutdown begins, so a stored message is acked.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.AcceptTimeout)
	_, err = c.acc.Accept(actx, msg)
	cancel()
	switch inbox.ActionFor(err) {
	case inbox.ActionAck:
		if err := d.Ack(false); err != nil {
			// The channel is gone: the broker redelivers, and that is a Duplicate.
			log.DebugContext(ctx, "pginbox/rabbitmq: ack failed", "err", err)
			return
		}
		c.acked.Add(1)
	case inbox.ActionReject:
		reason, receipt := ReasonInvalid, ""
		if ce := (*inbox.ConflictError)(nil); errors.As(err, &ce) {
			reason, receipt = ReasonConflict, ce.ReceiptID.String()
		}
		c.deadLetter(ctx, dl, d, reason, err, receipt)
	default:
		n, counted := deliveryCount(d)
		if !counted && d.Redelivered {
			c.warnOnce.Do(func() {
				log.Warn("pginbox/rabbitmq: redeliveries carry no x-delivery-count header (a classic queue?): retries are not bounded; use a quorum queue")
			})
		}
		if counted && n+1 >= int64(c.cfg.DeliveryLimit) {
			c.deadLetter(ctx, dl, d, ReasonDeliveryLimit, err, "")
			return
		}
		log.WarnContext(ctx, "pginbox/rabbitmq: accept failed, requeueing", "delivery", n+1, "err", err)
		c.requeue(ctx, d, c.retryDelay(n))
	}
}

// deadLetter republishes d with the reason and acks it; if the dead letter
// cannot be published, d is requeued instead.
func (c *Consumer) deadLetter(ctx context.Context, dl *deadLetterer, d amqp.Delivery, reason string, cause error, receipt string) {
	log := c.cfg.Logger.With("queue", c.cfg.Queue, "message_id", d.MessageId, "reason", reason)
	if err := dl.publish(ctx, d, c.cfg.Queue, reason, cause, receipt); err != nil {
		log.ErrorContext(ctx, "pginbox/rabbitmq: dead letter not published, requeueing", "err", err)
		n, _ := deliveryCount(d)
		c.requeue(ctx, d, c.retryDelay(n))
		return
	}
	if err := d.Ack(false); err != nil {
		// Redelivered: it will be dead-lettered again (a second copy there).
		log.DebugContext(ctx, "pginbox/rabbitmq: ack after dead letter failed", "err", err)
		return
	}
	c.deadLettered.Add(1)
	log.InfoContext(ctx, "pginbox/rabbitmq: dead-lettered", "err", cause)
}

// requeue waits (less if the session ends) and nacks d with requeue.
func (c *Consumer) requeue(ctx context.Context, d amqp.Delivery, wait time.Duration) {
	t := time.NewTimer(wait)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	if err := d.Nack(false, true); err != nil {
		return // the channel is gone: the broker requeues it anyway
	}
	c.requeued.Add(1)
}

// retryDelay is RetryDelay doubled per earlier delivery, capped.
func (c *Consumer) retryDelay(earlier int64) time.Duration {
	d := c.cfg.RetryDelay
	for range min(earlier, 32) {
		if d >= c.cfg.MaxRetryDelay {
			break
		}
		d *= 2
	}
	return min(d, c.cfg.MaxRetryDelay)
}

// deliveryCount is how often d was delivered before, from the quorum queue's
// x-delivery-count header, and whether the header was there. A first
// delivery has no header, which counts as 0 when not redelivered.
func deliveryCount(d amqp.Delivery) (int64, bool) {
	switch v := d.Headers["x-delivery-count"].(type) {
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case int16:
		return int64(v), true
	case int8:
		return int64(v), true
	case int:
		return int64(v), true
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	}
	return 0, !d.Redelivered
}

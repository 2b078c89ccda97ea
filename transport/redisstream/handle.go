package redisstream

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// acceptTimeout bounds one accept (and one dead letter). It must stay below
// ClaimIdle so that a slow accept is not claimed by another consumer
// meanwhile; half of it is.
func (c *Consumer) acceptTimeout() time.Duration { return c.cfg.ClaimIdle / 2 }

// handle accepts one entry and settles it: XACK, nothing (retry), or a dead
// letter with XACK. delivered is the entry's delivery count.
func (c *Consumer) handle(ctx context.Context, m redis.XMessage, delivered int64) {
	log := c.log.With("entry", m.ID, "delivered", delivered)
	// An accept finishes even when Run is being stopped.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.acceptTimeout())
	defer cancel()
	if delivered > c.cfg.DeliveryLimit {
		cause := fmt.Errorf("not accepted after %d deliveries (DeliveryLimit); last error: %s", delivered-1, c.lastErr.Recall(m.ID))
		c.deadLetter(ctx, log, m, delivered, ReasonDeliveryLimit, cause)
		return
	}
	msg, err := c.decode(m)
	if err != nil {
		c.deadLetter(ctx, log, m, delivered, ReasonDecode, err)
		return
	}
	log = log.With("message_id", msg.MessageID)
	res, err := c.acc.Accept(ctx, msg)
	switch inbox.ActionFor(err) {
	case inbox.ActionAck:
		c.lastErr.Forget(m.ID)
		if err := c.rdb.XAck(ctx, c.cfg.Stream, c.cfg.Group, m.ID).Err(); err != nil {
			// It stays pending, is claimed again, and the next accept is a Duplicate.
			log.Warn("pginbox/redisstream: XACK failed; the entry will be claimed again", "err", err)
			return
		}
		log.Debug("pginbox/redisstream: accepted", "outcome", res.Outcome, "receipt", res.ID)
	case inbox.ActionRetry:
		c.lastErr.Remember(m.ID, err)
		log.Warn("pginbox/redisstream: accept failed; the entry stays pending and is claimed again", "err", err, "after", c.cfg.ClaimIdle)
	case inbox.ActionReject:
		c.deadLetter(ctx, log, m, delivered, settle.Reason(err), err)
	}
}

// decode runs Config.Decode and fills the message ID from IDField.
func (c *Consumer) decode(m redis.XMessage) (inbox.Message, error) {
	msg, err := c.cfg.Decode(m)
	if err != nil {
		return inbox.Message{}, err
	}
	msg.Scope = c.cfg.Scope
	if msg.MessageID == "" {
		if v, ok := m.Values[c.cfg.IDField].(string); ok {
			msg.MessageID = v
		}
	}
	if msg.MessageID == "" {
		return inbox.Message{}, fmt.Errorf("no message ID: add a %q field to the entry, or set MessageID in Config.Decode", c.cfg.IDField)
	}
	return msg, nil
}

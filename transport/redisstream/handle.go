package redisstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
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
	if delivered > c.cfg.MaxDeliveries {
		cause := fmt.Errorf("not accepted after %d deliveries (MaxDeliveries); last error: %s", delivered-1, c.recall(m.ID))
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
		c.forget(m.ID)
		if err := c.rdb.XAck(ctx, c.cfg.Stream, c.cfg.Group, m.ID).Err(); err != nil {
			// It stays pending, is claimed again, and the next accept is a Duplicate.
			log.Warn("pginbox/redisstream: XACK failed; the entry will be claimed again", "err", err)
			return
		}
		log.Debug("pginbox/redisstream: accepted", "outcome", res.Outcome, "receipt", res.ID)
	case inbox.ActionRetry:
		c.remember(m.ID, err)
		log.Warn("pginbox/redisstream: accept failed; the entry stays pending and is claimed again", "err", err, "after", c.cfg.ClaimIdle)
	case inbox.ActionReject:
		c.deadLetter(ctx, log, m, delivered, reasonOf(err), err)
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

// reasonOf is the dead-letter reason of a rejecting accept error.
func reasonOf(err error) string {
	if errors.Is(err, inbox.ErrIdentityConflict) {
		return ReasonConflict
	}
	return ReasonInvalid
}

// receiptOf is the ID of the stored receipt a conflict names, or "".
func receiptOf(err error) string {
	var conflict *inbox.ConflictError
	if errors.As(err, &conflict) {
		return conflict.ReceiptID.String()
	}
	return ""
}

func (c *Consumer) remember(id string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.lastErr[id]; ok || len(c.lastErr) < maxRemembered {
		c.lastErr[id] = err.Error()
	}
}

func (c *Consumer) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lastErr, id)
}

// recall returns and forgets why entry id was last retried.
func (c *Consumer) recall(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	reason, ok := c.lastErr[id]
	delete(c.lastErr, id)
	if !ok {
		return "unknown here (another consumer, or a restart, handled the last try)"
	}
	return reason
}

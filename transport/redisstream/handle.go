package redisstream

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/redisbase"
)

// handle accepts one entry and settles it: XACK, nothing (it stays pending
// and is claimed again), or a dead letter with XACK. delivered is the
// entry's delivery count.
func (c *Consumer) handle(ctx context.Context, m redis.XMessage, delivered int64) {
	// An accept, and its XACK or dead letter, finish even when Run is being
	// stopped, within half of ClaimIdle: no other consumer claims the entry
	// meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ClaimIdle/2)
	defer cancel()
	c.base.Handle(ctx, redisbase.Delivery{
		ID:        m.ID,
		Delivered: delivered,
		Log:       c.log.With("entry", m.ID, "delivered", delivered),
		Decode:    func() (inbox.Message, error) { return c.decode(m) },
		Ack: func(ctx context.Context, _ inbox.AcceptResult) error {
			return c.rdb.XAck(ctx, c.cfg.Stream, c.cfg.Group, m.ID).Err()
		},
		Reject: func(ctx context.Context, reason string, cause error) error {
			return c.deadLetter(ctx, m, delivered, reason, cause)
		},
	})
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

package redisstream

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Fields a dead letter carries besides the original entry's fields.
const (
	FieldCode       = "pginbox_code"       // CodeDecode, CodeInvalid, inbox.CodeIdentityConflict or CodeMaxDeliveries
	FieldReason     = "pginbox_reason"     // the error, in words
	FieldStream     = "pginbox_stream"     // the stream the entry came from
	FieldEntryID    = "pginbox_entry_id"   // its ID there
	FieldDeliveries = "pginbox_deliveries" // how often it was delivered
)

// Dead-letter codes (FieldCode) besides inbox.CodeIdentityConflict.
const (
	CodeDecode        = "DECODE"         // Config.Decode failed, or no message ID
	CodeInvalid       = "INVALID"        // the inbox rejected the message (*inbox.ValidationError)
	CodeMaxDeliveries = "MAX_DELIVERIES" // MaxDeliveries deliveries without an accept
)

// deadLetter adds m to the dead-letter stream with the reason and
// acknowledges it, in one MULTI: both happen or neither. When it fails the
// entry stays pending and is claimed again later.
func (c *Consumer) deadLetter(ctx context.Context, log *slog.Logger, m redis.XMessage, delivered int64, code, reason string) {
	values := make([]any, 0, 2*len(m.Values)+10)
	for k, v := range m.Values {
		values = append(values, k, v)
	}
	values = append(values,
		FieldCode, code,
		FieldReason, reason,
		FieldStream, c.cfg.Stream,
		FieldEntryID, m.ID,
		FieldDeliveries, strconv.FormatInt(delivered, 10))
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: c.cfg.DeadLetterStream, Values: values})
		p.XAck(ctx, c.cfg.Stream, c.cfg.Group, m.ID)
		return nil
	})
	if err != nil {
		c.remember(m.ID, fmt.Errorf("dead-lettering failed: %w", err))
		log.Error("pginbox/redisstream: dead-lettering failed; the entry stays pending and is claimed again", "code", code, "reason", reason, "err", err)
		return
	}
	c.forget(m.ID)
	log.Warn("pginbox/redisstream: moved to the dead-letter stream", "dead_letter_stream", c.cfg.DeadLetterStream, "code", code, "reason", reason)
}

package redisstream

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Fields a dead letter carries besides the original entry's fields.
const (
	FieldReason     = "pginbox-reason"     // ReasonDecode, ReasonInvalid, ReasonConflict or ReasonDeliveryLimit
	FieldError      = "pginbox-error"      // the error, in words
	FieldReceipt    = "pginbox-receipt"    // for a conflict: the stored receipt's ID
	FieldStream     = "pginbox-stream"     // the stream the entry came from
	FieldEntryID    = "pginbox-entry-id"   // its ID there
	FieldDeliveries = "pginbox-deliveries" // how often it was delivered
)

// Dead-letter reasons, in the pginbox-reason field.
const (
	ReasonDecode        = settle.ReasonDecode        // Config.Decode failed, or no message ID
	ReasonInvalid       = settle.ReasonInvalid       // the inbox rejected the message (*inbox.ValidationError)
	ReasonConflict      = settle.ReasonConflict      // the same identity is stored with other content (*inbox.ConflictError)
	ReasonDeliveryLimit = settle.ReasonDeliveryLimit // more than DeliveryLimit deliveries without an accept
)

// deadLetter adds m to the dead-letter stream with the reason and
// acknowledges it, in one MULTI: both happen or neither. When it fails the
// entry stays pending and is claimed again later.
func (c *Consumer) deadLetter(ctx context.Context, m redis.XMessage, delivered int64, reason string, cause error) error {
	values := make([]any, 0, 2*len(m.Values)+12)
	for k, v := range m.Values {
		values = append(values, k, v)
	}
	if receipt := settle.Receipt(cause); receipt != "" {
		values = append(values, FieldReceipt, receipt)
	}
	values = append(values,
		FieldReason, reason,
		FieldError, cause.Error(),
		FieldStream, c.cfg.Stream,
		FieldEntryID, m.ID,
		FieldDeliveries, strconv.FormatInt(delivered, 10))
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: c.cfg.DeadLetterStream, Values: values})
		p.XAck(ctx, c.cfg.Stream, c.cfg.Group, m.ID)
		return nil
	})
	return err
}

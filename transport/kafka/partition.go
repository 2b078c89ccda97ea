package kafka

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Dead-letter reasons, in the pginbox-reason header.
const (
	ReasonConflict      = settle.ReasonConflict      // the identity is stored with other content (*inbox.ConflictError)
	ReasonInvalid       = settle.ReasonInvalid       // the inbox rejected the record (*inbox.ValidationError)
	ReasonDecode        = settle.ReasonDecode        // Config.Decode failed, or the record has no ID
	ReasonDeliveryLimit = settle.ReasonDeliveryLimit // Config.DeliveryLimit failed accepts of the record alone
)

// recordKey names a record for its count of failed accepts.
type recordKey struct {
	topic     string
	partition int32
	offset    int64
}

func keyOf(r *kgo.Record) recordKey { return recordKey{r.Topic, r.Partition, r.Offset} }

// partition accepts one partition's records (in offset order) with one
// AcceptBatch. When a batch fails, any of its records may be at fault, so
// from there they are accepted one at a time, up to the first that fails
// alone: only that one is counted against DeliveryLimit. A record that
// failed alone before is tried alone first when it is read again. It
// returns the last record the offset may pass (nil if none) and the first
// record it must not pass (nil if all went through).
func (c *Consumer) partition(ctx context.Context, cl *kgo.Client, topic string, part int32, recs []*kgo.Record) (through, stop *kgo.Record) {
	log := c.cfg.Logger.With("topic", topic, "partition", part)
	alone := c.attempts.Failed(keyOf(recs[0]))
	for len(recs) > 0 {
		n := len(recs)
		if alone {
			n = 1
		}
		t, s, batchErr := c.accept(ctx, cl, log, recs[:n])
		if t != nil {
			through = t
		}
		switch {
		case batchErr != nil:
			log.WarnContext(ctx, "pginbox/kafka: accept batch failed; accepting one record at a time", "from_offset", recs[0].Offset, "records", n, "err", batchErr)
			alone = true
		case s != nil:
			return through, s
		default:
			recs = recs[n:]
		}
		if alone && len(recs) > 0 && ctx.Err() != nil {
			return through, recs[0] // shutting down: the rest is re-read
		}
	}
	return through, nil
}

// accept accepts recs with one AcceptBatch and settles them. It returns the
// last record the offset may pass, the first it must not pass, and the
// error of a batch of several that failed as a whole (then neither is set).
func (c *Consumer) accept(ctx context.Context, cl *kgo.Client, log *slog.Logger, recs []*kgo.Record) (through, stop *kgo.Record, batchErr error) {
	msgs := make([]inbox.Message, 0, len(recs))
	decodeErrs := make([]error, len(recs))
	for i, r := range recs {
		m, err := c.cfg.Decode(r)
		if err != nil {
			decodeErrs[i] = err
			continue
		}
		m.Scope = c.cfg.Scope
		msgs = append(msgs, m)
	}
	// The batch finishes even when shutdown begins, so its offsets commit.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.AcceptTimeout)
	defer cancel()
	items, err := c.acc.AcceptBatch(actx, msgs)
	if err != nil {
		if len(recs) > 1 {
			return nil, nil, err
		}
		return c.failed(ctx, actx, cl, log, recs[0], err)
	}
	next := 0 // index into items
	for i, r := range recs {
		var reason, receipt string
		cause := decodeErrs[i]
		if cause != nil {
			reason = ReasonDecode
		} else {
			it := items[next]
			next++
			if it.Action() == inbox.ActionAck {
				c.acked.Add(1)
				c.attempts.Forget(keyOf(r))
				through = r
				continue
			}
			cause = it.Err
			reason, receipt = settle.Reason(cause), settle.Receipt(cause)
		}
		if !c.reject(ctx, actx, cl, log, r, reason, cause, receipt) {
			return through, r, nil
		}
		through = r
	}
	return through, nil, nil
}

// failed counts a failed accept of r alone. Below DeliveryLimit, r is read
// again after the retry delay; at the limit it is dead-lettered.
func (c *Consumer) failed(ctx, actx context.Context, cl *kgo.Client, log *slog.Logger, r *kgo.Record, err error) (through, stop *kgo.Record, batchErr error) {
	n := c.attempts.Fail(keyOf(r))
	if n < c.cfg.DeliveryLimit {
		log.WarnContext(ctx, "pginbox/kafka: accept failed, will re-read", "offset", r.Offset, "attempt", n, "err", err)
		return nil, r, nil
	}
	cause := fmt.Errorf("not accepted after %d deliveries (DeliveryLimit); last error: %w", n, err)
	if !c.reject(ctx, actx, cl, log, r, ReasonDeliveryLimit, cause, "") {
		return nil, r, nil
	}
	return r, nil, nil
}

// reject produces r to the dead-letter topic and reports whether the
// broker took it; if not, the offset must stop at r, which is re-read.
func (c *Consumer) reject(ctx, actx context.Context, cl *kgo.Client, log *slog.Logger, r *kgo.Record, reason string, cause error, receipt string) bool {
	if err := c.deadLetter(actx, cl, r, reason, cause, receipt); err != nil {
		log.ErrorContext(ctx, "pginbox/kafka: dead letter not produced, will re-read", "offset", r.Offset, "dead_letter_topic", c.cfg.DeadLetterTopic, "err", err)
		return false
	}
	c.deadLettered.Add(1)
	c.attempts.Forget(keyOf(r))
	log.InfoContext(ctx, "pginbox/kafka: dead-lettered", "offset", r.Offset, "reason", reason, "err", cause)
	return true
}

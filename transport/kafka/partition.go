package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pginbox/pginbox/inbox"
)

// Dead-letter reasons, in the pginbox-reason header.
const (
	ReasonConflict = "conflict"
	ReasonInvalid  = "invalid"
	ReasonDecode   = "decode"
)

// partition accepts one partition's records (in offset order) with one
// AcceptBatch. It returns the last record the offset may pass (nil if none)
// and the first record it must not pass (nil if all went through).
func (c *Consumer) partition(ctx context.Context, cl *kgo.Client, topic string, part int32, recs []*kgo.Record) (through, stop *kgo.Record) {
	log := c.cfg.Logger.With("topic", topic, "partition", part)
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
		log.WarnContext(ctx, "pginbox/kafka: accept batch failed, will re-read", "from_offset", recs[0].Offset, "records", len(recs), "err", err)
		return nil, recs[0]
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
				through = r
				continue
			}
			cause, reason = it.Err, ReasonInvalid
			if ce := (*inbox.ConflictError)(nil); errors.As(cause, &ce) {
				reason, receipt = ReasonConflict, ce.ReceiptID.String()
			}
		}
		if err := c.deadLetter(actx, cl, r, reason, cause, receipt); err != nil {
			log.ErrorContext(ctx, "pginbox/kafka: dead letter not produced, will re-read", "offset", r.Offset, "dead_letter_topic", c.cfg.DeadLetterTopic, "err", err)
			return through, r
		}
		c.deadLettered.Add(1)
		log.InfoContext(ctx, "pginbox/kafka: dead-lettered", "offset", r.Offset, "reason", reason, "err", cause)
		through = r
	}
	return through, nil
}

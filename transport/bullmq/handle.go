package bullmq

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/redisbase"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Fields a failed job carries besides BullMQ's failedReason.
const (
	FieldReason  = "pginbox-reason"  // ReasonDecode, ReasonInvalid, ReasonConflict or ReasonDeliveryLimit
	FieldReceipt = "pginbox-receipt" // for a conflict: the stored receipt's ID
)

// Reasons a job is failed for, in FieldReason and at the start of its
// failedReason.
const (
	ReasonDecode        = settle.ReasonDecode        // Config.Decode failed, or no message ID
	ReasonInvalid       = settle.ReasonInvalid       // the inbox rejected the message (*inbox.ValidationError)
	ReasonConflict      = settle.ReasonConflict      // the same identity is stored with other content (*inbox.ConflictError)
	ReasonDeliveryLimit = settle.ReasonDeliveryLimit // taken more than DeliveryLimit times without an accept
)

// finishTimeout bounds the move to completed or failed after an accept
// (which gets LockDuration/2): together they stay below LockDuration, so
// the lock outlives both and no other worker takes the job meanwhile. The
// finish has its own budget: a slow accept must not leave it no time.
func (c *Consumer) finishTimeout() time.Duration { return c.cfg.LockDuration / 4 }

// handle accepts one job and settles it: completed, nothing (retry after the
// lock expires), or failed.
func (c *Consumer) handle(ctx context.Context, job Job, token string) {
	// An accept finishes even when Run is being stopped.
	c.base.Handle(context.WithoutCancel(ctx), redisbase.Delivery{
		ID:        job.ID,
		Delivered: job.AttemptsStarted,
		Log:       c.log.With("job", job.ID, "attempts_started", job.AttemptsStarted),
		Decode:    func() (inbox.Message, error) { return c.decode(job) },
		Ack: func(ctx context.Context, res inbox.AcceptResult) error {
			rv, _ := json.Marshal(map[string]string{"outcome": string(res.Outcome), "receipt": res.ID.String()})
			return c.finish(ctx, job.ID, token, "completed", "returnvalue", string(rv))
		},
		Reject: func(ctx context.Context, reason string, cause error) error {
			return c.fail(ctx, job, token, reason, cause)
		},
	})
}

// decode runs Config.Decode and fills the message ID.
func (c *Consumer) decode(job Job) (inbox.Message, error) {
	msg, err := c.cfg.Decode(job)
	if err != nil {
		return inbox.Message{}, err
	}
	msg.Scope = c.cfg.Scope
	if msg.MessageID == "" && c.cfg.IDField == "" {
		msg.MessageID = job.ID
	}
	if msg.MessageID == "" {
		var data map[string]any
		if err := json.Unmarshal(job.Data, &data); err != nil {
			return inbox.Message{}, fmt.Errorf("job data is not a JSON object, so it has no %q field: %w", c.cfg.IDField, err)
		}
		v, ok := data[c.cfg.IDField].(string)
		if !ok || v == "" {
			return inbox.Message{}, fmt.Errorf("no message ID: the job data has no string field %q (Config.IDField); add it, or set MessageID in Config.Decode", c.cfg.IDField)
		}
		msg.MessageID = v
	}
	return msg, nil
}

// fail moves the job to failed with the reason. When that fails the job is
// taken again after its lock expires.
func (c *Consumer) fail(ctx context.Context, job Job, token, reason string, cause error) error {
	extra := []any{FieldReason, reason}
	if receipt := settle.Receipt(cause); receipt != "" {
		extra = append(extra, FieldReceipt, receipt)
	}
	return c.finish(ctx, job.ID, token, "failed", "failedReason", "pginbox "+reason+": "+cause.Error(), extra...)
}

// finish runs finishScript for a job this consumer holds.
func (c *Consumer) finish(ctx context.Context, id, token, target, field, value string, extra ...any) error {
	k := c.keys
	set, keepOpt := k.completed, "removeOnComplete"
	if target == "failed" {
		set, keepOpt = k.failed, "removeOnFail"
	}
	args := append([]any{k.base, id, token, nowMillis(), target, field, value, keepOpt}, extra...)
	ctx, cancel := context.WithTimeout(ctx, c.finishTimeout())
	defer cancel()
	code, err := finishScript.Run(ctx, c.rdb, []string{k.active, set, k.events, k.stalled, k.meta}, args...).Int()
	if err != nil {
		return fmt.Errorf("pginbox/bullmq: moving job %s to %s: %w", id, target, err)
	}
	switch code {
	case 0:
		return nil
	case finishMissingJob:
		return fmt.Errorf("pginbox/bullmq: job %s is gone (removed)", id)
	case finishMissingLock:
		return fmt.Errorf("pginbox/bullmq: the lock of job %s expired before it was moved to %s (an accept slower than LockDuration/2?)", id, target)
	case finishNotActive:
		return fmt.Errorf("pginbox/bullmq: job %s is no longer active", id)
	case finishLockNotOurs:
		return fmt.Errorf("pginbox/bullmq: job %s is locked by another worker (its lock expired and it was taken again)", id)
	}
	return fmt.Errorf("pginbox/bullmq: moving job %s to %s: script returned %s", id, target, strconv.Itoa(code))
}

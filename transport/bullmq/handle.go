package bullmq

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/pginbox/pginbox/inbox"
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

// acceptTimeout bounds one accept, and finishTimeout the move to completed
// or failed after it: together they stay below LockDuration, so the lock
// outlives both and no other worker takes the job meanwhile. The finish has
// its own budget: a slow accept must not leave it no time.
func (c *Consumer) acceptTimeout() time.Duration { return c.cfg.LockDuration / 2 }
func (c *Consumer) finishTimeout() time.Duration { return c.cfg.LockDuration / 4 }

// handle accepts one job and settles it: completed, nothing (retry after the
// lock expires), or failed.
func (c *Consumer) handle(ctx context.Context, job Job, token string) {
	log := c.log.With("job", job.ID, "attempts_started", job.AttemptsStarted)
	// An accept finishes even when Run is being stopped.
	ctx = context.WithoutCancel(ctx)
	if job.AttemptsStarted > c.cfg.DeliveryLimit {
		cause := fmt.Errorf("not accepted after %d deliveries (DeliveryLimit); last error: %s", job.AttemptsStarted-1, c.lastErr.Recall(job.ID))
		c.fail(ctx, log, job, token, ReasonDeliveryLimit, cause)
		return
	}
	msg, err := c.decode(job)
	if err != nil {
		c.fail(ctx, log, job, token, ReasonDecode, err)
		return
	}
	log = log.With("message_id", msg.MessageID)
	actx, cancel := context.WithTimeout(ctx, c.acceptTimeout())
	res, err := c.acc.Accept(actx, msg)
	cancel()
	switch inbox.ActionFor(err) {
	case inbox.ActionAck:
		c.lastErr.Forget(job.ID)
		rv, _ := json.Marshal(map[string]string{"outcome": string(res.Outcome), "receipt": res.ID.String()})
		if err := c.finish(ctx, job.ID, token, "completed", "returnvalue", string(rv)); err != nil {
			// The job goes back to wait when its lock expires, and the next accept is a Duplicate.
			log.Warn("pginbox/bullmq: completing the job failed; it is taken again after its lock expires", "err", err)
			return
		}
		log.Debug("pginbox/bullmq: accepted", "outcome", res.Outcome, "receipt", res.ID)
	case inbox.ActionRetry:
		c.lastErr.Remember(job.ID, err)
		log.Warn("pginbox/bullmq: accept failed; the job stays active and is taken again after its lock expires", "err", err, "after", c.cfg.LockDuration)
	case inbox.ActionReject:
		c.fail(ctx, log, job, token, settle.Reason(err), err)
	}
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
func (c *Consumer) fail(ctx context.Context, log *slog.Logger, job Job, token, reason string, cause error) {
	extra := []any{FieldReason, reason}
	if receipt := settle.Receipt(cause); receipt != "" {
		extra = append(extra, FieldReceipt, receipt)
	}
	failedReason := "pginbox " + reason + ": " + cause.Error()
	if err := c.finish(ctx, job.ID, token, "failed", "failedReason", failedReason, extra...); err != nil {
		c.lastErr.Remember(job.ID, fmt.Errorf("failing the job failed: %w", err))
		log.Error("pginbox/bullmq: failing the job failed; it is taken again after its lock expires", "reason", reason, "cause", cause, "err", err)
		return
	}
	c.lastErr.Forget(job.ID)
	log.Warn("pginbox/bullmq: job moved to failed", "reason", reason, "err", cause)
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

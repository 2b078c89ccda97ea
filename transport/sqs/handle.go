package sqs

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// handle accepts one message and settles it: DeleteMessage after an accept
// or a stored dead letter, ChangeMessageVisibility to the retry delay when
// the database failed. Nothing is deleted before Accept said so.
func (c *Consumer) handle(ctx context.Context, m types.Message) {
	receives, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	log := c.log.With("sqs_message_id", aws.ToString(m.MessageId), "receives", receives)
	// An accept (and a dead letter) finish even when Run is being stopped;
	// the visibility timeout is extended meanwhile, up to this bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(4*c.cfg.VisibilityTimeout, time.Minute))
	defer cancel()
	stopExtending := c.extend(ctx, log, m)

	msg, err := c.decode(m)
	if err != nil {
		stopExtending()
		c.reject(ctx, log, m, receives, ReasonDecode, err)
		return
	}
	log = log.With("message_id", msg.MessageID)
	actx, cancelAccept := context.WithTimeout(ctx, c.cfg.AcceptTimeout)
	res, err := c.acc.Accept(actx, msg)
	cancelAccept()
	stopExtending()
	switch inbox.ActionFor(err) {
	case inbox.ActionAck:
		if err := c.delete(ctx, m); err != nil {
			// Received again later; the next accept is a Duplicate.
			log.Warn("pginbox/sqs: delete failed; the message will be received again", "err", err)
			return
		}
		c.acked.Add(1)
		log.Debug("pginbox/sqs: accepted", "outcome", res.Outcome, "receipt", res.ID)
	case inbox.ActionRetry:
		c.retry(ctx, log, m, receives, err)
	case inbox.ActionReject:
		c.reject(ctx, log, m, receives, settle.Reason(err), err)
	}
}

// extend keeps m hidden while it is being handled: every half visibility
// timeout it sets the timeout to a full one again. The returned function
// stops it and waits until no extension is in flight.
func (c *Consumer) extend(ctx context.Context, log *slog.Logger, m types.Message) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(c.cfg.VisibilityTimeout / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := c.setVisibility(ctx, m, c.cfg.VisibilityTimeout); err != nil && ctx.Err() == nil {
				log.Warn("pginbox/sqs: extending the visibility timeout failed; the message may be received twice (the inbox deduplicates)", "err", err)
			} else if err == nil {
				log.Debug("pginbox/sqs: visibility timeout extended", "by", c.cfg.VisibilityTimeout)
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// retry hides m for the retry delay; it is then received again.
func (c *Consumer) retry(ctx context.Context, log *slog.Logger, m types.Message, receives int, cause error) {
	delay := c.cfg.retryDelay(receives)
	c.retries.Add(1)
	log.Warn("pginbox/sqs: accept failed; receiving it again", "err", cause, "in", delay)
	if err := c.setVisibility(ctx, m, delay); err != nil {
		log.Warn("pginbox/sqs: setting the retry delay failed; the message is received again after its visibility timeout", "err", err)
	}
}

// decode runs Config.Decode and fills the message ID from AttrMessageID.
func (c *Consumer) decode(m types.Message) (inbox.Message, error) {
	msg, err := c.cfg.Decode(m)
	if err != nil {
		return inbox.Message{}, err
	}
	msg.Scope = c.cfg.Scope
	if msg.MessageID == "" {
		msg.MessageID = stringAttr(m, AttrMessageID)
	}
	if msg.MessageID == "" {
		return inbox.Message{}, errors.New("no message ID: send a " + AttrMessageID + " message attribute, or set MessageID in Config.Decode")
	}
	return msg, nil
}

func (c *Consumer) delete(ctx context.Context, m types.Message) error {
	_, err := c.cfg.Client.DeleteMessage(ctx, &sqs.DeleteMessageInput{
		QueueUrl:      aws.String(c.cfg.QueueURL),
		ReceiptHandle: m.ReceiptHandle,
	})
	return err
}

func (c *Consumer) setVisibility(ctx context.Context, m types.Message, d time.Duration) error {
	_, err := c.cfg.Client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(c.cfg.QueueURL),
		ReceiptHandle:     m.ReceiptHandle,
		VisibilityTimeout: seconds(d),
	})
	return err
}

// stringAttr is the string value of m's message attribute name, or "".
func stringAttr(m types.Message, name string) string {
	if a, ok := m.MessageAttributes[name]; ok {
		return aws.ToString(a.StringValue)
	}
	return ""
}

package sqs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pginbox/pginbox/transport/internal/settle"
)

// maxAttributes is SQS's limit of message attributes a message.
const maxAttributes = 10

// reject sends m to Config.DeadLetterQueueURL, then deletes it. If the dead
// letter cannot be sent, m is not deleted: it is received again after the
// retry delay and rejected again. Without a dead-letter queue, m is made
// visible again at once, for the queue's redrive policy.
func (c *Consumer) reject(ctx context.Context, log *slog.Logger, m types.Message, receives int, reason string, cause error) {
	if c.cfg.DeadLetterQueueURL == "" {
		log.Warn("pginbox/sqs: rejected; leaving it to the queue's redrive policy (set Config.DeadLetterQueueURL to dead-letter it at once)", "reason", reason, "err", cause)
		if err := c.setVisibility(ctx, m, 0); err != nil {
			log.Warn("pginbox/sqs: making the message visible failed; it is received again after its visibility timeout", "err", err)
		}
		return
	}
	log.Warn("pginbox/sqs: rejecting to the dead-letter queue", "reason", reason, "err", cause)
	if err := c.sendDeadLetter(ctx, m, receives, reason, cause); err != nil {
		err = fmt.Errorf("pginbox/sqs: sending the dead letter to %s failed (does the queue exist and may we send to it?): %w", c.cfg.DeadLetterQueueURL, err)
		c.retry(ctx, log, m, receives, err)
		return
	}
	if err := c.delete(ctx, m); err != nil {
		// Received again and rejected again: the dead-letter queue then holds
		// two copies, with the same AttrMessageID if it had one.
		log.Warn("pginbox/sqs: delete after the dead letter failed; the message will be received again", "err", err)
		return
	}
	c.deadLettered.Add(1)
}

func (c *Consumer) sendDeadLetter(ctx context.Context, m types.Message, receives int, reason string, cause error) error {
	origin, err := json.Marshal(map[string]any{
		"queue": c.cfg.QueueURL, "message_id": aws.ToString(m.MessageId), "receives": receives,
	})
	if err != nil {
		return err
	}
	attrs := map[string]types.MessageAttributeValue{
		AttrReason: stringValue(reason),
		AttrError:  stringValue(cause.Error()),
		AttrOrigin: stringValue(string(origin)),
	}
	if r := settle.Receipt(cause); r != "" {
		attrs[AttrReceipt] = stringValue(r)
	}
	// The original attributes, as many as fit, in name order.
	for _, name := range slices.Sorted(maps.Keys(m.MessageAttributes)) {
		if _, ok := attrs[name]; !ok && len(attrs) < maxAttributes {
			attrs[name] = m.MessageAttributes[name]
		}
	}
	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(c.cfg.DeadLetterQueueURL),
		MessageBody:       m.Body,
		MessageAttributes: attrs,
	}
	if isFIFO(c.cfg.DeadLetterQueueURL) {
		in.MessageGroupId = aws.String(aws.ToString(m.MessageId))
		in.MessageDeduplicationId = aws.String(aws.ToString(m.MessageId))
	}
	_, err = c.cfg.Client.SendMessage(ctx, in)
	return err
}

func stringValue(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

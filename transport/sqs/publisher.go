package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// Publisher sends outbox events to SQS queues for an outbox.Relay, one
// SendMessage each, in order. Every message carries its event ID in
// AttrMessageID; on FIFO queues it is also the MessageDeduplicationId, so
// the queue drops a resend within its five-minute deduplication interval (a
// relay that crashed after sending and before marking resends once its lease
// expired: keep RelayConfig.Lease under five minutes). Standard queues do
// not deduplicate: the receiving inbox does, by AttrMessageID.
//
// An SQS queue stores a message durably before SendMessage returns; servers
// that emulate SQS may keep queues in memory only.
type Publisher struct {
	cfg PublisherConfig
}

// NewPublisher returns a Publisher.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg, err := cfgerr.Ready(cfg, PublisherConfig.withDefaults, PublisherConfig.validate)
	if err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg}, nil
}

// Close returns nil: the Publisher holds nothing the Client does not.
func (p *Publisher) Close() error { return nil }

// Publish sends msgs one at a time; see outbox.Publisher.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	failed := false
	for i, m := range msgs {
		if errs[i] = p.send(ctx, m); errs[i] != nil {
			failed = true
		}
	}
	if failed {
		return errs
	}
	return nil
}

func (p *Publisher) send(ctx context.Context, m outbox.Message) error {
	in, err := p.input(m)
	if err != nil {
		return err
	}
	if _, err := p.cfg.Client.SendMessage(ctx, in); err != nil {
		return sendError(aws.ToString(in.QueueUrl), err)
	}
	return nil
}

// input maps an event to its SendMessage input.
func (p *Publisher) input(m outbox.Message) (*sqs.SendMessageInput, error) {
	url := p.cfg.QueueURL(m)
	attrs := map[string]types.MessageAttributeValue{
		AttrMessageID:     stringValue(m.ID.String()),
		AttrEventType:     stringValue(m.EventType),
		AttrSchemaVersion: {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(m.SchemaVersion))},
		AttrSource:        stringValue(m.Source),
	}
	if m.OrderingKey != "" {
		attrs[AttrOrderingKey] = stringValue(m.OrderingKey)
	}
	if len(m.Metadata) > 0 {
		md, err := json.Marshal(m.Metadata)
		if err != nil {
			return nil, handler.Permanent(fmt.Errorf("%w: metadata: %w", ErrPublishRejected, err))
		}
		attrs[AttrMetadata] = stringValue(string(md))
	}
	size := len(m.Payload)
	for name, a := range attrs {
		size += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue))
	}
	if size > p.cfg.MaxMessageBytes {
		return nil, handler.Permanent(fmt.Errorf("%w: %d bytes with attributes, over MaxMessageBytes (%d): emit smaller events or raise the queue's MaximumMessageSize and MaxMessageBytes, then requeue it", ErrPublishRejected, size, p.cfg.MaxMessageBytes))
	}
	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(url),
		MessageBody:       aws.String(string(m.Payload)),
		MessageAttributes: attrs,
	}
	if isFIFO(url) {
		group := m.OrderingKey
		if group == "" {
			group = m.ID.String()
		}
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(m.ID.String())
	}
	return in, nil
}

// sendError maps a failed send: permanent when the server found the
// message itself invalid, retryable otherwise (no queue yet, server away,
// throttled, timeout).
func sendError(url string, err error) error {
	if _, ok := errors.AsType[*types.InvalidMessageContents](err); ok {
		return handler.Permanent(fmt.Errorf("%w: %w", ErrPublishRejected, err))
	}
	if queueMissing(err) {
		return fmt.Errorf("pginbox/sqs: queue %s does not exist (the relay retries; create it, or fix the destination): %w", url, err)
	}
	if ae, ok := errors.AsType[smithy.APIError](err); ok && ae.ErrorCode() == "InvalidParameterValue" {
		return fmt.Errorf("pginbox/sqs: %s refused the message (the relay retries; a FIFO queue needs a .fifo URL): %w", url, err)
	}
	return fmt.Errorf("pginbox/sqs: sending to %s (the relay retries): %w", url, err)
}

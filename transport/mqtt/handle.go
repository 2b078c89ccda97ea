package mqtt

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// handle accepts one message and settles it: PUBACK, a reconnect for
// redelivery, or a dead letter and PUBACK.
func (c *Consumer) handle(ctx context.Context, d delivery) {
	log := c.log.With("topic", d.pb.Topic, "packet_id", d.pb.PacketID)
	if !c.current(d.gen) {
		log.Debug("pginbox/mqtt: skipping a message of a connection being replaced; the broker redelivers it")
		return
	}
	c.sessionLoss.Found()
	// An accept finishes even when Run is being stopped.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.AcceptTimeout)
	defer cancel()

	msg, err := c.decode(d.pb)
	if err != nil {
		c.reject(ctx, log, d, ReasonDecode, err)
		return
	}
	log = log.With("message_id", msg.MessageID)
	res, err := c.acc.Accept(ctx, msg)
	switch inbox.ActionFor(err) {
	case inbox.ActionAck:
		c.attempts.Forget(keyOf(d.pb, msg))
		if c.ack(log, d) {
			c.acked.Add(1)
		}
		log.Debug("pginbox/mqtt: accepted", "outcome", res.Outcome, "receipt", res.ID)
	case inbox.ActionRetry:
		c.failed(ctx, log, d, msg, err)
	case inbox.ActionReject:
		c.reject(ctx, log, d, settle.Reason(err), err)
	}
}

// ack releases the PUBACK (paho sends acknowledgements in arrival order).
// A lost connection loses it; the broker then redelivers and the next
// accept is a Duplicate.
// It reports whether the acknowledgement was handed to paho.
func (c *Consumer) ack(log *slog.Logger, d delivery) bool {
	if !c.current(d.gen) {
		log.Debug("pginbox/mqtt: connection replaced before the acknowledgement; the broker redelivers")
		return false
	}
	if err := d.cli.Ack(d.pb); err != nil {
		log.Warn("pginbox/mqtt: acknowledging failed; the broker redelivers after a reconnect", "err", err)
		return false
	}
	return true
}

// messageKey names a message for its count of failed accepts.
type messageKey struct{ topic, id string }

func keyOf(pb *paho.Publish, msg inbox.Message) messageKey {
	return messageKey{pb.Topic, msg.MessageID}
}

// failed counts a failed accept of a message the broker redelivers (QoS 1
// or 2). Below DeliveryLimit it is retried; at the limit it is
// dead-lettered, so that the messages after it move on.
func (c *Consumer) failed(ctx context.Context, log *slog.Logger, d delivery, msg inbox.Message, err error) {
	if d.pb.QoS == 0 {
		c.retry(log, d, err) // never redelivered: nothing to count
		return
	}
	k := keyOf(d.pb, msg)
	n := c.attempts.Fail(k)
	if n < c.cfg.DeliveryLimit {
		c.retry(log.With("attempt", n), d, err)
		return
	}
	cause := fmt.Errorf("not accepted after %d deliveries (DeliveryLimit); last error: %w", n, err)
	if c.reject(ctx, log, d, ReasonDeliveryLimit, cause) {
		c.attempts.Forget(k)
	}
}

func (c *Consumer) retry(log *slog.Logger, d delivery, err error) {
	if d.pb.QoS == 0 {
		log.Error("pginbox/mqtt: accept failed for a QoS 0 message, which is never redelivered: it is lost; publish with QoS 1", "err", err)
		return
	}
	log.Warn("pginbox/mqtt: accept failed; reconnecting for redelivery", "err", err, "in", c.cfg.RetryDelay)
	c.retries.Add(1)
	c.retryLater(d.gen)
}

// decode runs Config.Decode and fills the message ID from IDProperty.
func (c *Consumer) decode(pb *paho.Publish) (inbox.Message, error) {
	msg, err := c.cfg.Decode(pb)
	if err != nil {
		return inbox.Message{}, err
	}
	msg.Scope = c.cfg.Scope
	if msg.MessageID == "" && pb.Properties != nil {
		msg.MessageID = pb.Properties.User.Get(c.cfg.IDProperty)
	}
	if msg.MessageID == "" {
		return inbox.Message{}, fmt.Errorf("no message ID: publish with a %q user property, or set MessageID in Config.Decode", c.cfg.IDProperty)
	}
	return msg, nil
}

// User properties a dead letter carries besides the original message's.
const (
	PropertyReason  = "pginbox-reason"  // ReasonDecode, ReasonInvalid, ReasonConflict or ReasonDeliveryLimit
	PropertyError   = "pginbox-error"   // the error, in words
	PropertyReceipt = "pginbox-receipt" // for a conflict: the stored receipt's ID
	PropertyTopic   = "pginbox-topic"   // the topic the message came from
)

// Dead-letter reasons, in the pginbox-reason user property.
const (
	ReasonDecode        = settle.ReasonDecode        // Config.Decode failed, or no message ID
	ReasonInvalid       = settle.ReasonInvalid       // the inbox rejected the message (*inbox.ValidationError)
	ReasonConflict      = settle.ReasonConflict      // the same identity is stored with other content (*inbox.ConflictError)
	ReasonDeliveryLimit = settle.ReasonDeliveryLimit // Config.DeliveryLimit failed accepts (counted by the Consumer)
)

// reasonNoSubscribers is MQTT v5's PUBACK "No matching subscribers": the
// broker accepted the message and dropped it.
const reasonNoSubscribers = 0x10

// reject publishes the message to the dead-letter topic and, once the broker
// confirmed it reached a subscriber, acknowledges it. Otherwise the message
// is not acknowledged and comes back after a reconnect. It reports whether
// the message was dead-lettered.
func (c *Consumer) reject(ctx context.Context, log *slog.Logger, d delivery, reason string, cause error) bool {
	log.Warn("pginbox/mqtt: rejecting to the dead-letter topic", "reason", reason, "err", cause)
	props := &paho.PublishProperties{}
	if p := d.pb.Properties; p != nil {
		props.ContentType, props.PayloadFormat, props.CorrelationData = p.ContentType, p.PayloadFormat, p.CorrelationData
		props.User = append(props.User, p.User...)
	}
	props.User.Add(PropertyReason, reason).Add(PropertyError, cause.Error()).Add(PropertyTopic, d.pb.Topic)
	if receipt := settle.Receipt(cause); receipt != "" {
		props.User.Add(PropertyReceipt, receipt)
	}
	// On the message's own connection: a redelivery can arrive before
	// autopaho counts a new connection as up, when its Publish would fail.
	resp, err := d.cli.Publish(ctx, &paho.Publish{Topic: c.cfg.DeadLetterTopic, QoS: 1, Payload: d.pb.Payload, Properties: props})
	if err == nil && resp.ReasonCode == reasonNoSubscribers {
		err = fmt.Errorf("nobody subscribes to dead-letter topic %q, so the broker dropped the dead letter; keep a persistent session subscribed to it", c.cfg.DeadLetterTopic)
	}
	if err != nil {
		c.retry(log, d, fmt.Errorf("pginbox/mqtt: dead-lettering failed: %w", err))
		return false
	}
	if c.ack(log, d) {
		c.deadLettered.Add(1)
	}
	return true
}

package nats

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// handle accepts one message and settles it: Ack, NakWithDelay or (after the
// dead letter is stored) Term. Nothing is acknowledged before Accept said so.
func (c *Consumer) handle(ctx context.Context, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil { // not a JetStream delivery: cannot happen on a pull consumer
		c.log.Error("pginbox/nats: message without JetStream metadata", "subject", m.Subject(), "err", err)
		return
	}
	log := c.log.With("seq", md.Sequence.Stream, "delivered", md.NumDelivered)
	// An accept (and a dead letter) finish even when Run is being stopped:
	// half of AckWait, so the server does not redeliver while we still work.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.AckWait/2)
	defer cancel()

	msg, err := c.decode(m)
	if err != nil {
		c.reject(ctx, log, m, md, ReasonDecode, err)
		return
	}
	log = log.With("message_id", msg.MessageID)
	res, err := c.acc.Accept(ctx, msg)
	switch inbox.ActionFor(err) {
	case inbox.ActionAck:
		c.lastErr.Forget(md.Sequence.Stream)
		if err := m.Ack(); err != nil {
			// The server redelivers; the next accept is a Duplicate.
			log.Warn("pginbox/nats: ack failed; the message will be redelivered", "err", err)
			return
		}
		log.Debug("pginbox/nats: accepted", "outcome", res.Outcome, "receipt", res.ID)
	case inbox.ActionRetry:
		c.lastErr.Remember(md.Sequence.Stream, err)
		delay := c.cfg.retryDelay(md.NumDelivered)
		log.Warn("pginbox/nats: accept failed; redelivering", "err", err, "in", delay)
		if err := m.NakWithDelay(delay); err != nil {
			log.Warn("pginbox/nats: nak failed; the server redelivers after AckWait", "err", err)
		}
	case inbox.ActionReject:
		c.reject(ctx, log, m, md, settle.Reason(err), err)
	}
}

// decode runs Config.Decode and fills the message ID from Nats-Msg-Id.
func (c *Consumer) decode(m jetstream.Msg) (inbox.Message, error) {
	msg, err := c.cfg.Decode(m)
	if err != nil {
		return inbox.Message{}, err
	}
	msg.Scope = c.cfg.Scope
	if msg.MessageID == "" {
		msg.MessageID = m.Headers().Get(jetstream.MsgIDHeader)
	}
	if msg.MessageID == "" {
		return inbox.Message{}, errors.New("no message ID: publish with a Nats-Msg-Id header, or set MessageID in Config.Decode")
	}
	return msg, nil
}

// reject stores the message under the dead-letter subject, then terminates
// it. If the dead letter cannot be stored the message is not terminated: it
// is redelivered and rejected again.
func (c *Consumer) reject(ctx context.Context, log *slog.Logger, m jetstream.Msg, md *jetstream.MsgMetadata, reason string, cause error) {
	log.Warn("pginbox/nats: rejecting to the dead-letter subject", "reason", reason, "err", cause)
	dl := deadLetter{
		subject: m.Subject(), header: m.Headers(), data: m.Data(),
		seq: md.Sequence.Stream, deliveries: md.NumDelivered,
		reason: reason, err: cause.Error(), receipt: settle.Receipt(cause),
	}
	if err := c.publishDeadLetter(ctx, dl); err != nil {
		delay := c.cfg.retryDelay(md.NumDelivered)
		log.Error("pginbox/nats: the message stays in the stream and is redelivered", "err", err, "in", delay)
		c.lastErr.Remember(md.Sequence.Stream, err)
		if err := m.NakWithDelay(delay); err != nil {
			log.Warn("pginbox/nats: nak failed; the server redelivers after AckWait", "err", err)
		}
		return
	}
	c.lastErr.Forget(md.Sequence.Stream)
	if err := m.Term(); err != nil {
		// Redelivered, rejected again; the dead letter's Nats-Msg-Id makes
		// the stream drop the second copy within its duplicate window.
		log.Warn("pginbox/nats: term failed; the message will be redelivered", "err", err)
	}
}

package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Headers a dead letter carries besides the original message's headers
// (minus the server's Nats-* directives).
const (
	HeaderReason     = "Pginbox-Reason"      // ReasonDecode, ReasonInvalid, ReasonConflict or ReasonDeliveryLimit
	HeaderError      = "Pginbox-Error"       // the error, in words
	HeaderReceipt    = "Pginbox-Receipt"     // for a conflict: the stored receipt's ID
	HeaderStream     = "Pginbox-Stream"      // the stream the message came from
	HeaderSequence   = "Pginbox-Stream-Seq"  // its sequence in that stream
	HeaderSubject    = "Pginbox-Subject"     // its subject
	HeaderDeliveries = "Pginbox-Deliveries"  // how often it was delivered
	HeaderMsgID      = "Pginbox-Nats-Msg-Id" // its Nats-Msg-Id
)

// Dead-letter reasons, in the Pginbox-Reason header.
const (
	ReasonDecode        = settle.ReasonDecode        // Config.Decode failed, or no message ID
	ReasonInvalid       = settle.ReasonInvalid       // the inbox rejected the message (*inbox.ValidationError)
	ReasonConflict      = settle.ReasonConflict      // the same identity is stored with other content (*inbox.ConflictError)
	ReasonDeliveryLimit = settle.ReasonDeliveryLimit // DeliveryLimit deliveries without an accept
)

// deadLetter is a message on its way to the dead-letter subject.
type deadLetter struct {
	subject    string
	header     nats.Header
	data       []byte
	seq        uint64
	deliveries uint64
	reason     string
	err        string
	receipt    string
}

// publishDeadLetter stores dl under Config.DeadLetterSubject and waits for
// the stream's acknowledgement. Its Nats-Msg-Id is derived from the source
// stream and sequence, so a second dead letter of the same message (a lost
// Term, two instances handling one advisory) is dropped by the stream.
func (c *Consumer) publishDeadLetter(ctx context.Context, dl deadLetter) error {
	h := nats.Header{}
	for k, v := range dl.header {
		if strings.HasPrefix(k, "Nats-") { // server directives (Nats-Msg-Id, Nats-Expected-*, Nats-Rollup) were meant for the original
			continue
		}
		h[k] = v
	}
	h.Set(HeaderReason, dl.reason)
	h.Set(HeaderError, dl.err)
	if dl.receipt != "" {
		h.Set(HeaderReceipt, dl.receipt)
	}
	h.Set(HeaderStream, c.cfg.Stream)
	h.Set(HeaderSequence, strconv.FormatUint(dl.seq, 10))
	h.Set(HeaderSubject, dl.subject)
	h.Set(HeaderDeliveries, strconv.FormatUint(dl.deliveries, 10))
	if v := dl.header.Get(jetstream.MsgIDHeader); v != "" {
		h.Set(HeaderMsgID, v)
	}
	_, err := c.js.PublishMsg(ctx,
		&nats.Msg{Subject: c.cfg.DeadLetterSubject, Header: h, Data: dl.data},
		jetstream.WithMsgID(fmt.Sprintf("pginbox-dl:%s:%d", c.cfg.Stream, dl.seq)))
	if err != nil {
		return fmt.Errorf("pginbox/nats: publishing to dead-letter subject %q failed (%w); make sure a stream captures that subject", c.cfg.DeadLetterSubject, err)
	}
	return nil
}

// maxDeliveriesAdvisory is the part of the server's
// io.nats.jetstream.advisory.v1.max_deliver event we use.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// subscribeAdvisories listens for the server giving up on a message of our
// consumer. Instances of the same durable share a queue group, so one of
// them moves each exhausted message.
func (c *Consumer) subscribeAdvisories() (*nats.Subscription, error) {
	subject := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + c.cfg.Stream + "." + c.cfg.Durable
	sub, err := c.nc.QueueSubscribe(subject, "pginbox."+c.cfg.Durable, c.onMaxDeliveries)
	if err != nil {
		return nil, fmt.Errorf("pginbox/nats: subscribing to %s: %w", subject, err)
	}
	return sub, nil
}

// onMaxDeliveries moves an exhausted message, read back from the stream by
// its sequence, to the dead-letter subject. The server no longer delivers
// it; it stays in the stream until the stream's limits remove it.
func (c *Consumer) onMaxDeliveries(m *nats.Msg) {
	var a maxDeliveriesAdvisory
	if err := json.Unmarshal(m.Data, &a); err != nil {
		c.log.Error("pginbox/nats: unreadable max-deliveries advisory", "err", err)
		return
	}
	log := c.log.With("seq", a.StreamSeq, "delivered", a.Deliveries)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cause := fmt.Sprintf("not accepted after %d deliveries (DeliveryLimit); last error: %s", a.Deliveries, c.lastErr.Recall(a.StreamSeq))
	backoff := inbox.ExponentialBackoff(backoffStart, 2, backoffMax, 0)
	for attempt := 1; ; attempt++ {
		err := c.moveExhausted(ctx, a, cause)
		if err == nil {
			log.Warn("pginbox/nats: deliveries exhausted; moved to the dead-letter subject", "err", cause)
			return
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) || ctx.Err() != nil {
			log.Error("pginbox/nats: deliveries exhausted, but moving the message to the dead-letter subject failed; it stays in the stream, no longer delivered", "err", err)
			return
		}
		log.Warn("pginbox/nats: moving an exhausted message failed; retrying", "err", err)
		time.Sleep(backoff(attempt))
	}
}

func (c *Consumer) moveExhausted(ctx context.Context, a maxDeliveriesAdvisory, cause string) error {
	stream, err := c.js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return fmt.Errorf("pginbox/nats: looking up stream %q: %w", c.cfg.Stream, err)
	}
	raw, err := stream.GetMsg(ctx, a.StreamSeq)
	if err != nil {
		return fmt.Errorf("pginbox/nats: reading message %d back from the stream: %w", a.StreamSeq, err)
	}
	return c.publishDeadLetter(ctx, deadLetter{
		subject: raw.Subject, header: raw.Header, data: raw.Data,
		seq: a.StreamSeq, deliveries: a.Deliveries,
		reason: ReasonDeliveryLimit, err: cause,
	})
}

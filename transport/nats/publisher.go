package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// ackTimeout drops a publish whose PubAck never came (its reply was lost in
// a reconnect) from the client's pending set; Publish itself gives up when
// its context ends.
const ackTimeout = 30 * time.Second

// Publisher publishes outbox events to JetStream for an outbox.Relay. Every
// message carries its event ID as Nats-Msg-Id, so the stream drops a
// re-publish within its duplicate window (StreamConfig.Duplicates, 2 minutes
// by default): a relay that crashed after publishing and before marking
// republishes once its lease expired, so keep the window longer than
// RelayConfig.Lease plus PublishTimeout. A duplicate PubAck is success.
// Create it with NewPublisher and Close it when the relay stopped.
type Publisher struct {
	cfg PublisherConfig
	nc  *nats.Conn
	js  jetstream.JetStream

	duplicates atomic.Int64
	durable    durableSubjects
}

// NewPublisher connects (in the background when the server is not up yet)
// and returns a Publisher.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg, err := cfgerr.Ready(cfg, PublisherConfig.withDefaults, PublisherConfig.validate)
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{nats.Name("pginbox-relay")}, cfg.ConnectOptions...)
	opts = append(opts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("pginbox/nats: connecting to %s: %w", cfg.URL, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("pginbox/nats: %w", err)
	}
	return &Publisher{cfg: cfg, nc: nc, js: js}, nil
}

// Duplicates is how many publishes the stream acknowledged as duplicates of
// a message it already held (same Nats-Msg-Id within its window).
func (p *Publisher) Duplicates() int64 { return p.duplicates.Load() }

// Close closes the connection.
func (p *Publisher) Close() error { p.nc.Close(); return nil }

// Publish publishes msgs asynchronously and waits for every PubAck, or until
// ctx ends; see outbox.Publisher.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		if err := p.checkDurable(ctx, p.cfg.Subject(m)); err != nil {
			errs[i] = err
			continue
		}
		f, err := p.js.PublishMsgAsync(p.msg(m))
		if err != nil {
			errs[i] = publishError(err)
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				p.duplicates.Add(1)
			}
		case err := <-f.Err():
			errs[i] = publishError(err)
		case <-ctx.Done():
			errs[i] = fmt.Errorf("pginbox/nats: no PubAck before the publish timeout (the relay retries; Nats-Msg-Id makes the stream drop a copy that did arrive): %w", ctx.Err())
		}
	}
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

// msg maps an event to its NATS message.
func (p *Publisher) msg(m outbox.Message) *nats.Msg {
	h := nats.Header{}
	h.Set(jetstream.MsgIDHeader, m.ID.String())
	h.Set(HeaderEventType, m.EventType)
	h.Set(HeaderSchemaVersion, strconv.Itoa(m.SchemaVersion))
	h.Set(HeaderSource, m.Source)
	if m.OrderingKey != "" {
		h.Set(HeaderOrderingKey, m.OrderingKey)
	}
	for k, v := range m.Metadata {
		h.Set(HeaderMetadataPrefix+k, v)
	}
	return &nats.Msg{Subject: p.cfg.Subject(m), Header: h, Data: m.Payload}
}

// publishError maps a failed publish: permanent when the message can never
// be stored, retryable otherwise (no stream yet, server away, timeout).
func publishError(err error) error {
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) {
		return handler.Permanent(fmt.Errorf("%w: %w: emit smaller events or raise the server's max_payload or the stream's max_msg_size, then requeue it", ErrPublishRejected, err))
	}
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("pginbox/nats: no stream captures the subject (the relay retries; create the stream): %w", err)
	}
	return fmt.Errorf("pginbox/nats: publishing (the relay retries): %w", err)
}

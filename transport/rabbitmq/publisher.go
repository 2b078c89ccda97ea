package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
)

// confirmChunk is how many messages are in flight before the Publisher waits
// for their confirms. It is also the return buffer: the library drops a
// return its listener does not take within seconds, and a dropped return
// would make an unroutable message look delivered.
const confirmChunk = 256

// Publisher publishes outbox events to RabbitMQ for an outbox.Relay, with
// publisher confirms: a message counts as delivered only once the broker
// confirmed it, and an unroutable message (published mandatory) is an error.
// Create it with NewPublisher; it connects on first use and again after the
// connection or channel went away. Close it when the relay stopped.
type Publisher struct {
	cfg PublisherConfig
	sem chan struct{} // one Publish at a time: confirms and returns are per channel

	conn     *amqp.Connection
	ch       *amqp.Channel
	returns  chan amqp.Return
	closed   chan *amqp.Error // why the channel closed
	closeErr error            // what closed read, kept for the batch's other messages

	connects atomic.Int64
	durable  durableQueues
}

// NewPublisher returns a Publisher; it does not connect yet.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg, err := cfgerr.Ready(cfg, PublisherConfig.withDefaults, PublisherConfig.validate)
	if err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg, sem: make(chan struct{}, 1)}, nil
}

// Close closes the connection. A later Publish connects again.
func (p *Publisher) Close() error {
	p.sem <- struct{}{}
	defer func() { <-p.sem }()
	return p.drop()
}

// Publish publishes msgs and waits for their confirms; see outbox.Publisher.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	select {
	case p.sem <- struct{}{}:
		defer func() { <-p.sem }()
	case <-ctx.Done():
		return fill(errs, fmt.Errorf("pginbox/rabbitmq: another publish did not finish in time: %w", ctx.Err()))
	}
	for i, m := range msgs {
		if len(m.Payload) > p.cfg.MaxMessageSize {
			errs[i] = handler.Permanent(fmt.Errorf("%w: %d bytes, PublisherConfig.MaxMessageSize is %d: emit smaller events (store the bulk elsewhere and send a reference)",
				ErrTooLarge, len(m.Payload), p.cfg.MaxMessageSize))
		}
	}
	if err := p.connect(ctx); err != nil {
		return fill(errs, fmt.Errorf("pginbox/rabbitmq: connecting to publish (the relay retries): %w", err))
	}
	if !p.cfg.AllowNotDurable {
		for i, m := range msgs {
			if errs[i] == nil && p.cfg.Exchange(m) == "" {
				errs[i] = p.checkDurable(p.cfg.RoutingKey(m))
			}
		}
	}
	for start := 0; start < len(msgs); start += confirmChunk {
		end := min(start+confirmChunk, len(msgs))
		p.publishChunk(ctx, msgs[start:end], errs[start:end])
	}
	if p.ch.IsClosed() {
		_ = p.drop() // reconnect on the next call
	}
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

// publishChunk publishes msgs (those without an error yet) and waits for
// their confirms, then matches the broker's returns.
func (p *Publisher) publishChunk(ctx context.Context, msgs []outbox.Message, errs []error) {
	p.drainReturns(nil) // left over from an earlier call cut short
	confs := make([]*amqp.DeferredConfirmation, len(msgs))
	for i, m := range msgs {
		if errs[i] != nil {
			continue
		}
		dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, p.cfg.Exchange(m), p.cfg.RoutingKey(m), true, false, publishing(m))
		if err != nil {
			fill(errs[i:], fmt.Errorf("pginbox/rabbitmq: publishing (the relay retries): %w", err))
			break
		}
		confs[i] = dc
	}
	byID := map[string]int{}
	for i, dc := range confs {
		if dc == nil {
			continue
		}
		byID[msgs[i].ID.String()] = i
		ok, err := dc.WaitContext(ctx)
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("pginbox/rabbitmq: no publisher confirm before the publish timeout (the relay retries; raise RelayConfig.PublishTimeout if the broker is slow): %w", err)
		case !ok && p.ch.IsClosed():
			errs[i] = fmt.Errorf("pginbox/rabbitmq: the channel closed before the broker confirmed the message (the relay reconnects and retries): %w", p.closeReason())
		case !ok:
			errs[i] = fmt.Errorf("%w (an internal broker error or a full queue with overflow reject-publish; the relay retries)", ErrNacked)
		}
	}
	p.drainReturns(func(r amqp.Return) {
		i, ok := byID[r.MessageId]
		if !ok || errs[i] != nil {
			return
		}
		err := fmt.Errorf("%w: exchange %q, routing key %q (%d %s): bind a queue for it", ErrUnroutable, r.Exchange, r.RoutingKey, r.ReplyCode, r.ReplyText)
		if p.cfg.UnroutablePermanent {
			err = handler.Permanent(err)
		}
		errs[i] = err
	})
}

// closeReason is why the channel closed. The library notifies close
// listeners before it fails the unconfirmed messages, so a broker's reason is
// here by the time a confirm was lost to it.
func (p *Publisher) closeReason() error {
	if p.closeErr == nil {
		p.closeErr = amqp.ErrClosed
		select {
		case e, ok := <-p.closed:
			if ok && e != nil {
				p.closeErr = e
			}
		default:
		}
	}
	return p.closeErr
}

// drainReturns passes every return received so far to f (nil: discard).
// The broker sends a message's return before its confirm, and the library
// hands it over before processing the confirm, so once the confirms are in,
// their returns are here.
func (p *Publisher) drainReturns(f func(amqp.Return)) {
	for {
		select {
		case r, ok := <-p.returns:
			if !ok {
				return // the channel closed: its returns were all sent before
			}
			if f != nil {
				f(r)
			}
		default:
			return
		}
	}
}

// connect opens a connection and a confirming channel unless both are open.
func (p *Publisher) connect(ctx context.Context) error {
	if p.ch != nil && !p.ch.IsClosed() && !p.conn.IsClosed() {
		return nil
	}
	_ = p.drop()
	conn, err := amqp.DialConfig(p.cfg.URL, amqp.Config{Dial: dialer(ctx)})
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err == nil && p.cfg.Setup != nil {
		if err = p.cfg.Setup(ch); err != nil {
			err = fmt.Errorf("PublisherConfig.Setup: %w", err)
		}
	}
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return err
	}
	p.conn, p.ch = conn, ch
	p.returns = ch.NotifyReturn(make(chan amqp.Return, confirmChunk))
	p.closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	if p.connects.Add(1) > 1 {
		p.cfg.Logger.InfoContext(ctx, "pginbox/rabbitmq: publisher reconnected")
	}
	return nil
}

// drop closes the connection, if any.
func (p *Publisher) drop() error {
	if p.conn == nil {
		return nil
	}
	err := p.conn.Close()
	p.conn, p.ch, p.returns, p.closed, p.closeErr = nil, nil, nil, nil, nil
	if errors.Is(err, amqp.ErrClosed) {
		return nil
	}
	return err
}

// dialer dials within ctx, and bounds the AMQP handshake by ctx's deadline
// (the library clears the deadline once the connection is open).
func dialer(ctx context.Context) func(network, addr string) (net.Conn, error) {
	return func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: dialTimeout}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		deadline := time.Now().Add(dialTimeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		if err := conn.SetDeadline(deadline); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
}

// publishing maps an event to its AMQP message.
func publishing(m outbox.Message) amqp.Publishing {
	h := amqp.Table{HeaderSchemaVersion: int32(m.SchemaVersion), HeaderSource: m.Source}
	if m.OrderingKey != "" {
		h[HeaderOrderingKey] = m.OrderingKey
	}
	if len(m.Metadata) > 0 {
		md := amqp.Table{}
		for k, v := range m.Metadata {
			md[k] = v
		}
		h[HeaderMetadata] = md
	}
	corr := m.Metadata[outbox.MetadataCorrelationID]
	if len(corr) > 255 { // a short string property
		corr = ""
	}
	return amqp.Publishing{
		Headers:       h,
		ContentType:   "application/json",
		DeliveryMode:  amqp.Persistent,
		MessageId:     m.ID.String(),
		Type:          m.EventType,
		AppId:         m.Source,
		Timestamp:     m.EmittedAt,
		CorrelationId: corr,
		Body:          m.Payload,
	}
}

func fill(errs []error, err error) []error {
	for i := range errs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
	return errs
}

package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const publishTimeout = 10 * time.Second

// deadLetterer publishes dead letters on its own channel in confirm mode,
// one at a time, so a return (unroutable) can be matched to its publish.
type deadLetterer struct {
	mu       sync.Mutex
	ch       *amqp.Channel
	returns  chan amqp.Return
	exchange string
	key      string // "" keeps the delivery's routing key
}

func newDeadLetterer(conn *amqp.Connection, exchange, key string) (*deadLetterer, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening the dead-letter channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("enabling publisher confirms: %w", err)
	}
	return &deadLetterer{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1)), exchange: exchange, key: key}, nil
}

// publish sends d to the dead-letter exchange with the reason headers and
// waits for the broker's confirm. It fails when the broker nacks it, routes
// it nowhere, or the channel is gone.
func (p *deadLetterer) publish(ctx context.Context, d amqp.Delivery, queue, reason string, cause error, receipt string) error {
	headers := amqp.Table{}
	for k, v := range d.Headers {
		headers[k] = v
	}
	headers["x-pginbox-reason"] = reason
	headers["x-pginbox-error"] = cause.Error()
	headers["x-pginbox-queue"] = queue
	if receipt != "" {
		headers["x-pginbox-receipt"] = receipt
	}
	key := p.key
	if key == "" {
		key = d.RoutingKey
	}
	msg := amqp.Publishing{
		Headers:         headers,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		UserId:          d.UserId,
		AppId:           d.AppId,
		Body:            d.Body,
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.returns) > 0 { // a late return of an earlier publish
		<-p.returns
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	conf, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, key, true, false, msg)
	if err != nil {
		return fmt.Errorf("publishing to dead-letter exchange %q: %w", p.exchange, err)
	}
	acked, err := conf.WaitContext(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("waiting for the broker to confirm the dead letter: %w", err)
	case !acked:
		return fmt.Errorf("the broker refused the dead letter (nack) on exchange %q", p.exchange)
	}
	// A return comes before its confirm, so it is buffered by now.
	select {
	case r := <-p.returns:
		return fmt.Errorf("dead-letter exchange %q routed it nowhere (%d %s, routing key %q): bind a queue to it", p.exchange, r.ReplyCode, r.ReplyText, key)
	default:
		return nil
	}
}

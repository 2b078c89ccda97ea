package rabbitmq

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrNotDurable means the queue a message is routed to does not survive a
// broker restart, so a message the broker confirmed, and the relay marked
// published, can vanish. A confirm means "delivered" durably when the message
// is persistent (the Publisher always sets delivery mode 2) and the queue is
// durable: a quorum queue (replicated, confirmed once a majority wrote it) or
// a durable classic queue (confirmed once written to disk). Declare the
// queue durable (quorum preferred), or set PublisherConfig.AllowNotDurable.
var ErrNotDurable = errors.New("pginbox/rabbitmq: the queue does not keep messages across a broker restart")

// durableQueues remembers the queues found durable. A refused queue is
// checked again at its next publish, so a queue redeclared durable is picked
// up.
type durableQueues struct {
	mu sync.Mutex
	ok map[string]bool
}

// checkDurable refuses a message for a transient queue, unless
// AllowNotDurable is set. Only messages to the default exchange name their
// queue (the routing key); for other exchanges the bindings decide, and the
// broker's queues must be declared durable by whoever binds them.
func (p *Publisher) checkDurable(queue string) error {
	d := &p.durable
	d.mu.Lock()
	ok := d.ok[queue]
	d.mu.Unlock()
	if ok {
		return nil
	}
	durable, err := p.probeDurable(queue)
	if err != nil {
		return err
	}
	if !durable {
		return fmt.Errorf("%w: queue %q is not durable (durable: false, or exclusive); declare it durable, as a quorum queue (x-queue-type: quorum), or set PublisherConfig.AllowNotDurable to accept losing confirmed messages on a restart (the relay retries)", ErrNotDurable, queue)
	}
	d.mu.Lock()
	if d.ok == nil {
		d.ok = map[string]bool{}
	}
	d.ok[queue] = true
	d.mu.Unlock()
	return nil
}

// probeDurable asks the broker whether queue is durable. AMQP has no call for
// that: a passive declare says the queue exists, then a declare with
// durable=true and no arguments either succeeds (a durable classic queue),
// or fails on the first inequivalent property, which RabbitMQ compares
// durable first: an 'x-queue-type' or other argument mismatch means durable
// matched. A missing queue is left to the publish (unroutable).
func (p *Publisher) probeDurable(queue string) (bool, error) {
	ch, err := p.conn.Channel()
	if err != nil {
		return false, fmt.Errorf("pginbox/rabbitmq: opening a channel to check queue %q (the relay retries): %w", queue, err)
	}
	if _, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil); err != nil {
		var amqpErr *amqp.Error
		if errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound {
			return true, nil // nothing to check: the publish reports it unroutable
		}
		return false, fmt.Errorf("pginbox/rabbitmq: checking queue %q (the relay retries): %w", queue, err)
	}
	_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
	if err == nil {
		_ = ch.Close()
		return true, nil
	}
	var amqpErr *amqp.Error
	switch {
	case errors.As(err, &amqpErr) && amqpErr.Code == amqp.PreconditionFailed:
		return !strings.Contains(amqpErr.Reason, "'durable'"), nil
	case errors.As(err, &amqpErr) && amqpErr.Code == amqp.ResourceLocked:
		return false, nil // exclusive to another connection: transient
	}
	return false, fmt.Errorf("pginbox/rabbitmq: checking queue %q (the relay retries): %w", queue, err)
}

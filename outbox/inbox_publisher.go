package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// InboxPublisher publishes into another pginbox inbox in-process, for tests
// and modular monoliths: one AcceptBatch per Publish call. An event becomes
// an inbox message with the event ID as its message ID (so a repeated
// publish is a Duplicate), the event's source, type, version, payload and
// metadata, and the consumer and scope below.
//
// Accepted and Duplicate are success. A message the inbox rejects (invalid,
// or an identity conflict) can never be accepted: that event goes DEAD. A
// storage failure or an uncertain commit is retried.
type InboxPublisher struct {
	// Client accepts into the receiving inbox. Required.
	Client *inbox.Client

	// Consumer names the receiving consumer. Defaults to the message's
	// Destination.
	Consumer func(Message) string

	// Scope is the receiving scope. Defaults to the message's Scope: the
	// scope of the transaction that emitted it. Derive another from what the
	// emitting service stored (its metadata, its destination), never from
	// payload fields a client controls.
	Scope func(Message) inbox.Scope
}

// Publish accepts msgs into the receiving inbox in one batch.
func (p InboxPublisher) Publish(ctx context.Context, msgs []Message) []error {
	errs := make([]error, len(msgs))
	if p.Client == nil {
		for i := range errs {
			errs[i] = errors.New("pginbox: InboxPublisher.Client is nil: set it to the receiving service's *inbox.Client")
		}
		return errs
	}
	batch := make([]inbox.Message, len(msgs))
	for i, m := range msgs {
		batch[i] = p.message(m)
	}
	items, err := p.Client.AcceptBatch(ctx, batch)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	failed := false
	for i, it := range items {
		switch inbox.ActionFor(it.Err) {
		case inbox.ActionAck:
		case inbox.ActionReject:
			errs[i] = handler.Permanent(fmt.Errorf("the receiving inbox rejected the event: %w", it.Err))
			failed = true
		default:
			errs[i] = it.Err
			failed = true
		}
	}
	if !failed {
		return nil
	}
	return errs
}

// message maps an outgoing event to the inbox message that delivers it.
func (p InboxPublisher) message(m Message) inbox.Message {
	consumer := m.Destination
	if p.Consumer != nil {
		consumer = p.Consumer(m)
	}
	scope := m.Scope
	if scope.Kind == "" {
		scope = inbox.Global() // a Message built by hand
	}
	if p.Scope != nil {
		scope = p.Scope(m)
	}
	return inbox.Message{
		Identity: inbox.Identity{
			Scope:     scope,
			Source:    m.Source,
			Consumer:  consumer,
			MessageID: m.ID.String(),
		},
		EventType:     m.EventType,
		SchemaVersion: m.SchemaVersion,
		Payload:       m.Payload,
		Metadata:      m.Metadata,
	}
}

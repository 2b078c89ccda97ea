package outbox

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pginbox/pginbox/inbox"
)

// Message is an event as a Publisher sends it.
type Message struct {
	// ID is the event's stable ID: send it as the message ID (an inbox's
	// MessageID, a broker's message-id header), so receivers deduplicate.
	ID            ID
	Source        string // the emitting service
	Destination   string // the destination the relay serves
	OrderingKey   string // empty when the event has none
	EventType     string // with SchemaVersion, the payload's shape
	SchemaVersion int    // the payload's schema version
	// Payload is the canonical JSON Emit stored.
	Payload  json.RawMessage
	Metadata map[string]string // as emitted: trace context, causation and correlation IDs
	// EmittedAt is when the emitting transaction started.
	EmittedAt time.Time
	// Attempt counts publish attempts from 1.
	Attempt int
	// Scope is the scope of the transaction that emitted the event: the
	// tenant a handler's transaction (or inbox.ApplyScope) set, global
	// otherwise.
	Scope inbox.Scope
}

// Publisher delivers messages somewhere: another inbox (InboxPublisher), a
// broker, an HTTP endpoint.
//
// Publish gets a batch with at most one message per ordering key and returns
// nil when every message was delivered, or one error per message (nil for
// those delivered). The relay marks the delivered ones PUBLISHED and retries
// the others later; wrap an error with handler.Permanent when retrying cannot
// help, and the event goes DEAD at once. Publish must return when ctx ends
// (RelayConfig.PublishTimeout, or the relay's shutdown): ordering per key
// relies on no publish outliving its claim. Delivering a message and then
// reporting an error only repeats it, which receivers tolerate.
type Publisher interface {
	// Publish delivers msgs, as the type's comment says.
	Publish(ctx context.Context, msgs []Message) []error
}

// PublishFunc publishes messages one at a time through a function: a
// Publisher for destinations without batches.
type PublishFunc func(ctx context.Context, m Message) error

// Publish calls f for every message, in order.
func (f PublishFunc) Publish(ctx context.Context, msgs []Message) []error {
	var errs []error
	for i, m := range msgs {
		if err := f(ctx, m); err != nil {
			if errs == nil {
				errs = make([]error, len(msgs))
			}
			errs[i] = err
		}
	}
	return errs
}

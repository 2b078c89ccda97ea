package inboxtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/inbox"
)

// EmittedEvent is an outbox event a handler emitted, as [Emitted] and
// [RequireEmitted] read it.
type EmittedEvent struct {
	ID            inbox.ID // the event's ID
	Type          string   // the event type
	SchemaVersion int      // its schema version
	Source        string   // the emitting service
	Destination   string   // where a relay publishes it
	OrderingKey   string   // "" for none
	// Payload is the canonical JSON stored, byte for byte.
	Payload  json.RawMessage
	Metadata map[string]string // with the causation and correlation IDs Emit added
	Scope    inbox.Scope       // the handler's scope, which the event inherits
	Status   string            // PENDING until a relay publishes it
}

// String describes the event for failure messages, for example
//
//	order.shipped v1 to shipping.v1 (key o-1)
func (e EmittedEvent) String() string {
	s := fmt.Sprintf("%s v%d to %s", e.Type, e.SchemaVersion, e.Destination)
	if e.OrderingKey != "" {
		s += " (key " + e.OrderingKey + ")"
	}
	return s
}

// Emitted returns the outbox events that the handler of receipt emitted
// (outbox.Emit with the handler's context) and committed, in emit order.
// Events of a handler transaction that rolled back are not there.
func Emitted(t testing.TB, q Querier, receipt inbox.ID) []EmittedEvent {
	t.Helper()
	evs, err := readEmitted(t.Context(), q, receipt)
	if err != nil {
		t.Fatalf("inboxtest.Emitted: receipt %s: %v", receipt, err)
	}
	return evs
}

// RequireEmitted fails the test unless the handler of identity's receipt
// emitted events of exactly the types wantTypes, in that order, and returns
// them for closer checks. The receipt is the delivery's, as
// [RequireReceipt] finds it (not a replay). The failure lists what was
// emitted.
func RequireEmitted(t testing.TB, q Querier, identity inbox.Identity, wantTypes ...string) []EmittedEvent {
	t.Helper()
	r := requireReceipt(t, "RequireEmitted", q, identity)
	evs, err := readEmitted(t.Context(), q, r.ID)
	if err != nil {
		t.Fatalf("inboxtest.RequireEmitted: %s: %v", r, err)
	}
	got := make([]string, len(evs))
	for i, e := range evs {
		got[i] = e.Type
	}
	if !slices.Equal(got, wantTypes) {
		var desc strings.Builder
		for _, e := range evs {
			desc.WriteString("\n\t" + e.String())
		}
		t.Fatalf("inboxtest.RequireEmitted: want [%s], emitted [%s]:%s\nby the handler of %s",
			strings.Join(wantTypes, ", "), strings.Join(got, ", "), desc.String(), r)
	}
	return evs
}

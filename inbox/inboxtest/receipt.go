package inboxtest

import (
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

// Receipt is a receipt as an assertion or [WaitForStatus] last saw it.
type Receipt struct {
	ID            inbox.ID       // the receipt
	Identity      inbox.Identity // the message's identity
	EventType     string         // the message's event type
	SchemaVersion int            // its schema version
	Status        inbox.Status   // the live status (the work row's while it has one)
	Attempts      int            // attempts started
	LastError     string         // "" when the last attempt did not fail
}

// String describes the receipt for failure messages, for example
//
//	receipt 01J9Z... tenant(acme)/checkout/billing.v1/evt-1 (order.created v1): DEAD, attempts 1, last error: customer deleted
func (r Receipt) String() string {
	return fmt.Sprintf("receipt %s %s (%s v%d): %s", r.ID, r.Identity, r.EventType, r.SchemaVersion, r.state())
}

// state is the part of a description that changes while a worker runs.
func (r Receipt) state() string {
	s := fmt.Sprintf("%s, attempts %d", r.Status, r.Attempts)
	if r.LastError != "" {
		s += ", last error: " + r.LastError
	}
	return s
}

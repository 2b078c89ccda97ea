package inboxtest

import (
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

// Receipt is a receipt as an assertion or [WaitForStatus] last saw it.
type Receipt struct {
	ID            inbox.ID
	Identity      inbox.Identity
	EventType     string
	SchemaVersion int
	Status        inbox.Status
	Attempts      int
	LastError     string // "" when the last attempt did not fail
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

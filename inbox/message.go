package inbox

import (
	"fmt"
	"math"

	"github.com/pginbox/pginbox/inboxtype"
)

// Shared types, re-exported so most code needs only this package.
type (
	ID        = inboxtype.ID
	Scope     = inboxtype.Scope
	ScopeKind = inboxtype.ScopeKind
	Status    = inboxtype.Status
	// Identity is what makes two deliveries the same message: its scope,
	// source (the producer system), consumer (the logical effect, e.g.
	// "orders.projection.v1") and message ID (the producer's event ID,
	// stable across redeliveries).
	Identity = inboxtype.Identity
)

// Scope kinds and receipt statuses, re-exported from inboxtype.
const (
	ScopeGlobal = inboxtype.ScopeGlobal
	ScopeTenant = inboxtype.ScopeTenant

	StatusPending    = inboxtype.StatusPending
	StatusProcessing = inboxtype.StatusProcessing
	StatusRetryable  = inboxtype.StatusRetryable
	StatusCompleted  = inboxtype.StatusCompleted
	StatusDead       = inboxtype.StatusDead
)

// Tenant returns the scope of one tenant. Take the ID from authenticated context,
// never from the payload.
func Tenant(id string) Scope { return inboxtype.Tenant(id) }

// Global returns the intentional global scope.
func Global() Scope { return inboxtype.Global() }

// MaxIdentityBytes is the longest identity string (scope ID, source, consumer,
// message ID, event type) in bytes.
const MaxIdentityBytes = 255

// Message is one delivery to accept.
type Message struct {
	Identity

	// EventType and SchemaVersion name the payload's shape, e.g. "order.created" v1.
	EventType     string
	SchemaVersion int

	// Payload is the event content. []byte and json.RawMessage are taken as JSON
	// text and checked as they are; any other value is encoded with encoding/json
	// first. Either way it is validated and canonicalized before fingerprinting.
	Payload any

	// Metadata (trace headers, correlation and causation IDs) is stored with the
	// receipt but is not part of the fingerprint.
	Metadata map[string]string

	// OrderingKey, when set, orders the message among the others of its
	// consumer, scope and key: they are handled one at a time, in accept
	// order, and a DEAD one blocks the key until an operator requeues or
	// skips it (AdminView.Skip). It follows the identity string rules and is
	// not part of the fingerprint. Defaults to "" (unordered: handled
	// concurrently with everything else).
	OrderingKey string
}

// Outcome says whether Accept stored a new receipt.
type Outcome string

const (
	Accepted  Outcome = "accepted"  // a new receipt was stored, PENDING
	Duplicate Outcome = "duplicate" // the identity existed with the same content: nothing changed
)

// AcceptResult is the outcome of a committed Accept.
type AcceptResult struct {
	Outcome Outcome // Accepted or Duplicate
	ID      ID      // the receipt: the new one, or the existing one
	// Status is PENDING for Accepted; for Duplicate, the existing receipt's current
	// status (a duplicate never resets state or retry budget).
	Status Status
}

func validateIdentity(id Identity) error {
	if err := validateScope(id.Scope); err != nil {
		return err
	}
	if err := validateString("source", id.Source); err != nil {
		return err
	}
	if err := validateString("consumer", id.Consumer); err != nil {
		return err
	}
	return validateString("message_id", id.MessageID)
}

// validateScope checks a scope: a tenant with a valid ID, or global without one.
func validateScope(s Scope) error {
	switch s.Kind {
	case ScopeGlobal:
		if s.ID != "" {
			return &ValidationError{Field: "scope.id", Rule: RuleOutOfRange, Detail: "a global scope has no ID; use inbox.Tenant(id) for a tenant"}
		}
		return nil
	case ScopeTenant:
		return validateString("scope.id", s.ID)
	default:
		return &ValidationError{Field: "scope", Rule: RuleRequired, Detail: "set Scope to inbox.Tenant(id) or inbox.Global()"}
	}
}

// identityOf builds an identity from its stored columns.
func identityOf(scopeKind, scopeID, source, consumer, messageID string) Identity {
	return inboxtype.IdentityOf(scopeKind, scopeID, source, consumer, messageID)
}

func validateSchemaVersion(v int) error {
	if v < 1 || v > math.MaxInt32 {
		return &ValidationError{Field: "schema_version", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%d: must be between 1 and %d", v, math.MaxInt32)}
	}
	return nil
}

// validateString applies the identity string rules: 1..255 bytes of valid UTF-8
// without control characters.
func validateString(field, s string) error {
	if rule, detail := inboxtype.CheckIdentityString(s); rule != "" {
		return &ValidationError{Field: field, Rule: Rule(rule), Detail: detail}
	}
	return nil
}

package inboxtype

import "fmt"

// Identity is what makes two deliveries the same message.
type Identity struct {
	Scope     Scope  // the tenant, or Global(); the zero Scope is invalid
	Source    string // the producer system
	Consumer  string // the logical effect, e.g. "orders.projection.v1"
	MessageID string // the producer's event ID, stable across redeliveries
}

// String is the identity as scope/source/consumer/message ID.
func (id Identity) String() string {
	return fmt.Sprintf("%s/%s/%s/%s", id.Scope, id.Source, id.Consumer, id.MessageID)
}

// IdentityOf builds an identity from its stored columns.
func IdentityOf(scopeKind, scopeID, source, consumer, messageID string) Identity {
	return Identity{
		Scope:  Scope{Kind: ScopeKind(scopeKind), ID: scopeID},
		Source: source, Consumer: consumer, MessageID: messageID,
	}
}

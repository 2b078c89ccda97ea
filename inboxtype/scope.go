package inboxtype

// ScopeKind is the kind of a Scope.
type ScopeKind string

const (
	ScopeGlobal ScopeKind = "global" // the intentional global scope: no tenant
	ScopeTenant ScopeKind = "tenant" // one tenant, named by Scope.ID
)

// Scope is the tenancy part of an identity: one tenant, or an intentional global
// scope. The zero Scope is invalid, so forgetting it is an error, not "global".
type Scope struct {
	Kind ScopeKind // the zero value is no kind: invalid
	ID   string    // tenant ID; empty for global
}

// Tenant returns the scope of one tenant. Take the ID from authenticated context,
// never from the payload.
func Tenant(id string) Scope { return Scope{Kind: ScopeTenant, ID: id} }

// Global returns the intentional global scope.
func Global() Scope { return Scope{Kind: ScopeGlobal} }

func (s Scope) String() string {
	if s.Kind == ScopeTenant {
		return "tenant(" + s.ID + ")"
	}
	return string(s.Kind)
}

// Status is a receipt's processing state.
type Status string

const (
	StatusPending    Status = "PENDING"    // accepted (or requeued), waiting for a worker
	StatusProcessing Status = "PROCESSING" // claimed: a worker holds its lease
	StatusRetryable  Status = "RETRYABLE"  // failed; claimed again once its backoff is due
	StatusCompleted  Status = "COMPLETED"  // its handler's transaction committed
	StatusDead       Status = "DEAD"       // failed permanently or spent its attempts: an operator requeues or skips it
)

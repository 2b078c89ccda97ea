package inboxtype

// ScopeKind is the kind of a Scope.
type ScopeKind string

const (
	ScopeGlobal ScopeKind = "global"
	ScopeTenant ScopeKind = "tenant"
)

// Scope is the tenancy part of an identity: one tenant, or an intentional global
// scope. The zero Scope is invalid, so forgetting it is an error, not "global".
type Scope struct {
	Kind ScopeKind
	ID   string // tenant ID; empty for global
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
	StatusPending    Status = "PENDING"
	StatusProcessing Status = "PROCESSING"
	StatusRetryable  Status = "RETRYABLE"
	StatusCompleted  Status = "COMPLETED"
	StatusDead       Status = "DEAD"
)

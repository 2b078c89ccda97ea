package console

import (
	"errors"

	"github.com/pginbox/pginbox/inbox"
)

type scopeKind uint8

const (
	scopeNone scopeKind = iota // the zero Scope: invalid
	scopeTenant
	scopeGlobal
	scopeAll
)

// Scope is what a console user may see and change: one tenant's receipts,
// the global-scope receipts, or every scope. The zero Scope is invalid, so an
// Authenticate hook that forgets to set it is refused rather than widened.
type Scope struct {
	kind   scopeKind
	tenant string
}

// Tenant is the scope of one tenant's receipts. Take the ID from the
// authenticated user, never from the request.
func Tenant(id string) Scope { return Scope{kind: scopeTenant, tenant: id} }

// Global is the scope of the global-scope receipts only.
func Global() Scope { return Scope{kind: scopeGlobal} }

// AllScopes is every receipt of every scope: the operator view.
func AllScopes() Scope { return Scope{kind: scopeAll} }

// IsZero reports whether s is the invalid zero Scope.
func (s Scope) IsZero() bool { return s.kind == scopeNone }

// String names the scope as inbox does: "tenant(acme)", "global" or "all
// scopes".
func (s Scope) String() string {
	switch s.kind {
	case scopeTenant:
		return "tenant(" + s.tenant + ")"
	case scopeGlobal:
		return "global"
	case scopeAll:
		return "all scopes"
	}
	return "no scope"
}

func (s Scope) check() error {
	switch {
	case s.kind == scopeNone:
		return errors.New("no scope: return console.Tenant(id), console.Global() or console.AllScopes()")
	case s.kind == scopeTenant && s.tenant == "":
		return errors.New("an empty tenant ID: console.Tenant needs the user's tenant")
	}
	return nil
}

// view is the admin view that every call of a user with this scope goes
// through, so the scope is part of every query.
func (s Scope) view(a *inbox.Admin) *inbox.AdminView {
	switch s.kind {
	case scopeTenant:
		return a.ForTenant(s.tenant)
	case scopeGlobal:
		return a.Global()
	case scopeAll:
		return a.Operator()
	default: // never widen a missing scope: a view that fails every call
		return a.ForScope(inbox.Scope{})
	}
}

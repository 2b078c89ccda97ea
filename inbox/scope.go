package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/internal/driver"
)

// Tenancy errors.
var (
	// ErrScopeMismatch matches every *ScopeMismatchError.
	ErrScopeMismatch = errors.New("pginbox: scope mismatch")

	// ErrTenancyRestricted: a view across scopes (Operator) ran on a role that
	// row-level security holds to one scope, so it would see nothing.
	ErrTenancyRestricted = errors.New("pginbox: row-level security restricts this role to one scope: " +
		"use a view of one scope (ForTenant, Global; --tenant on the CLI), " +
		"or set AdminConfig.SystemPool to a pool whose role has BYPASSRLS (schema.GrantStatements with system=true)")
)

// errWorkerRestricted: the worker's claims would see one scope (or none) and
// it would look idle.
type errWorkerRestricted struct{}

func (errWorkerRestricted) Error() string {
	return "pginbox: the worker claims across tenants, but row-level security restricts the role of its SystemPool to one scope: " +
		"set WorkerConfig.SystemPool to a pool whose role has BYPASSRLS (`inbox tenancy grant ROLE --system`)"
}

func (errWorkerRestricted) Is(target error) bool { return target == ErrTenancyRestricted }

// ScopeMismatchError: a caller's transaction already has a scope (ApplyScope)
// and the message belongs to another. pginbox never switches a caller's
// transaction to another scope; nothing was written.
type ScopeMismatchError struct {
	Tx   Scope // the scope the transaction has
	Want Scope // the scope of the message (or admin view) it was given
}

func (e *ScopeMismatchError) Error() string {
	return fmt.Sprintf("pginbox: the transaction is scoped to %s, not %s: pginbox never switches a transaction to another scope; "+
		"use a transaction of that scope (inbox.ApplyScope) or the call that opens its own (Accept, AcceptBatch, Requeue, Replay)", e.Tx, e.Want)
}

func (e *ScopeMismatchError) Is(target error) bool { return target == ErrScopeMismatch }

// ApplyScope sets s as the scope of tx: pginbox's row-level security policies
// then let tx see and write s's rows only, and the application's own policies
// can read the tenant with current_setting('pginbox.tenant', true). The setting
// ends with tx, so a pooled connection never carries it further. Call it first
// in every transaction that touches scoped rows under a role without BYPASSRLS;
// the worker does so for every handler transaction.
//
// On Citus, where the policies are evaluated on the worker nodes, it sets
// the scope with SET LOCAL statements that Citus sends to them (one round
// trip, as on one server); whether tx's database is distributed is read from
// the catalog once per database and process.
func ApplyScope(ctx context.Context, tx pgx.Tx, s Scope) error {
	if err := validateScope(s); err != nil {
		return err
	}
	drv, err := driver.For(ctx, tx)
	if err != nil {
		return dbError("applying the scope: reading the layout (Citus or one server)", err)
	}
	return applyScope(ctx, drv, tx, s)
}

// applyScope is ApplyScope for callers that know the layout.
func applyScope(ctx context.Context, drv driver.Driver, tx pgx.Tx, s Scope) error {
	if err := validateScope(s); err != nil {
		return err
	}
	if err := drv.SetScope(ctx, tx, driver.ScopeParams(s)); err != nil {
		return dbError("applying the scope", err)
	}
	return nil
}

// ensureScope gives the caller's tx the scope s unless it has one: it
// returns a *ScopeMismatchError, having changed nothing, when tx has another.
func ensureScope(ctx context.Context, drv driver.Driver, tx pgx.Tx, s Scope) error {
	have, applied, err := drv.EnsureScope(ctx, tx, s)
	if err != nil {
		return dbError("reading the transaction's scope", err)
	}
	if !applied && have != s {
		return &ScopeMismatchError{Tx: have, Want: s}
	}
	return nil
}

package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/db"
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
	distributed, err := txDistributed(ctx, tx)
	if err != nil {
		return dbError("applying the scope: reading the layout (Citus or one server)", err)
	}
	return applyScope(ctx, tx, s, distributed)
}

func scopeParams(s Scope) db.ScopeApplyParams {
	if s.Kind == ScopeGlobal {
		return db.ScopeApplyParams{Global: "on"}
	}
	return db.ScopeApplyParams{Tenant: s.ID}
}

// noScope clears the settings: the transaction sees no scoped row.
var noScope = db.ScopeApplyParams{}

// ensureScope gives the caller's tx the scope s unless it has one: it
// returns a *ScopeMismatchError, having changed nothing, when tx has another.
func ensureScope(ctx context.Context, tx pgx.Tx, s Scope, distributed bool) error {
	_, err := ensureScopeApplied(ctx, tx, s, distributed)
	return err
}

// ensureScopeApplied is ensureScope that also reports whether it set the
// scope (false: tx already had s). On Citus ScopeEnsure reads the scope on
// the coordinator, where SET LOCAL sets it too, and a scope it applied is
// then sent the Citus way: one more round trip, on Citus only.
func ensureScopeApplied(ctx context.Context, tx pgx.Tx, s Scope, distributed bool) (bool, error) {
	p := scopeParams(s)
	row, err := db.New(tx).ScopeEnsure(ctx, db.ScopeEnsureParams{ApplyTenant: p.Tenant, ApplyGlobal: p.Global})
	if err != nil {
		return false, dbError("reading the transaction's scope", err)
	}
	if row.Applied {
		if distributed {
			if err := applyScopeParams(ctx, tx, p, true); err != nil {
				return false, dbError("applying the scope", err)
			}
		}
		return true, nil
	}
	var have Scope
	if row.Tenant != "" {
		have = Tenant(row.Tenant)
	} else {
		have = Global()
	}
	if have != s {
		return false, &ScopeMismatchError{Tx: have, Want: s}
	}
	return false, nil
}

// queueScope queues ScopeApply in b, so the scope travels in the same round
// trip as the statement queued after it.
func queueScope(ctx context.Context, b *pgx.Batch, p db.ScopeApplyParams) {
	// The generated ScopeApply only calls Exec, which batchQueue records.
	_ = db.New(batchQueue{b}).ScopeApply(ctx, p)
}

// batchQueue is a db.DBTX that queues an Exec in a batch instead of running it.
type batchQueue struct{ b *pgx.Batch }

func (q batchQueue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (q batchQueue) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("pginbox: internal: batchQueue queues Exec only")
}

func (q batchQueue) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{errors.New("pginbox: internal: batchQueue queues Exec only")}
}

package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/driver"
)

// Defaults and limits of the admin API.
const (
	DefaultListLimit      = 100
	MaxListLimit          = 1000
	DefaultPurgeBatchSize = 1000
	MaxPurgeBatchSize     = 100_000
	// MaxReasonBytes bounds the reason recorded with a requeue or replay.
	MaxReasonBytes = 1024
)

// AdminConfig configures an Admin.
type AdminConfig struct {
	// Logger receives a record of every requeue, replay and purge, after it
	// commits. Defaults to slog.Default().
	Logger *slog.Logger

	// SystemPool runs the views across scopes (Operator: every read, requeue,
	// replay, purge and stats of all scopes). With row-level security enabled
	// (schema.EnableTenancy) its role needs BYPASSRLS; without it those views
	// fail with ErrTenancyRestricted instead of showing nothing. The views of
	// one scope (ForTenant, Global, ForScope) run on the admin's pool and apply
	// their scope in every transaction, so that pool can use the restricted
	// application role. Defaults to the admin's pool.
	SystemPool *pgxpool.Pool
}

func (c AdminConfig) withDefaults() AdminConfig {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Admin inspects and repairs receipts. It does nothing by itself: pick a view
// first, which fixes what the caller may see and change:
//
//	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
//	tenant := admin.ForTenant(tenantID) // one tenant's receipts only
//	global := admin.Global()            // global-scope receipts only
//	ops := admin.Operator()             // every scope, for operators
//
// The scope is part of every query's WHERE clause, so a tenant view cannot read
// or change another tenant's receipt even when it knows the ID: such an ID is
// simply not found. A view of one scope also applies its scope in the database
// (ApplyScope), so with row-level security enabled the database enforces it too.
type Admin struct {
	pool *pgxpool.Pool // views of one scope
	sys  *pgxpool.Pool // views of every scope
	log  *slog.Logger
	// drv is the layout's driver, probed at first use.
	drv driver.Lazy
}

// NewAdmin returns an Admin on pool. Like NewClient it does not touch the
// database; the first call reports a missing schema.
func NewAdmin(pool *pgxpool.Pool, cfg AdminConfig) (*Admin, error) {
	if pool == nil {
		return nil, errors.New("pginbox: NewAdmin: pool is nil: pass a *pgxpool.Pool from pgxpool.New")
	}
	cfg = cfg.withDefaults()
	sys := cfg.SystemPool
	if sys == nil {
		sys = pool
	}
	return &Admin{pool: pool, sys: sys, log: cfg.Logger, drv: driver.Lazy{Log: cfg.Logger}}, nil
}

// ForTenant returns a view of one tenant's receipts. Take the tenant ID from
// authenticated context, never from a request body. An invalid ID makes every
// call of the view fail with a *ValidationError.
func (a *Admin) ForTenant(tenantID string) *AdminView {
	return a.ForScope(Tenant(tenantID))
}

// Global returns a view of the global-scope receipts only.
func (a *Admin) Global() *AdminView {
	return &AdminView{admin: a, scope: Global()}
}

// Operator returns a view of every receipt in every scope. Give it to
// operators, not to code acting for a tenant.
func (a *Admin) Operator() *AdminView {
	return &AdminView{admin: a, all: true}
}

// ForScope returns the view of one scope: ForTenant or Global.
func (a *Admin) ForScope(s Scope) *AdminView {
	return &AdminView{admin: a, scope: s, err: validateScope(s)}
}

// AdminView is Admin restricted to a scope (or to none, for Operator). It is
// safe for concurrent use.
type AdminView struct {
	admin *Admin
	all   bool
	scope Scope
	err   error // an invalid view fails every call
}

// String names the view: "tenant(acme)", "global" or "all scopes".
func (v *AdminView) String() string {
	if v.all {
		return "all scopes"
	}
	return v.scope.String()
}

// scopeArgs returns the scope predicate's parameters shared by every admin query.
func (v *AdminView) scopeArgs() (all bool, kind, id string) {
	if v.all {
		return true, "", ""
	}
	return false, string(v.scope.Kind), v.scope.ID
}

// readOnly runs fn in a read-only REPEATABLE READ transaction of the view, so
// the parts of one answer agree with each other.
func (v *AdminView) readOnly(ctx context.Context, fn func(q *db.Queries) error) error {
	return pgx.BeginTxFunc(ctx, v.pool(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			if err := v.enter(ctx, tx); err != nil {
				return err
			}
			return fn(db.New(tx))
		})
}

func (v *AdminView) notFound(id ID) error {
	return fmt.Errorf("%w: %s (in %s)", ErrNotFound, id, v)
}

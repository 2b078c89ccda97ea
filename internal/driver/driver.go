// Package driver holds what differs between the database layouts pginbox
// runs on: one PostgreSQL server, or Citus with pginbox's tables
// distributed by scope. The runtime (inbox's Client, Worker and Admin,
// outbox's Emit, Relay and Admin) gets the layout's Driver once, from one
// catalog probe (For, Lazy), and sends every statement whose form depends on
// the layout through it. Statements that are the same on both layouts stay
// in the runtime as calls of package db.
//
// The conformance suite (package drivertest) runs every transition of
// docs/ARCHITECTURE.md through each driver, on its layout.
package driver

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
)

// Driver runs the statements whose form depends on the layout.
type Driver interface {
	// Name is the layout: "postgres" (one server) or "citus".
	Name() string

	// Scoped returns statements run on b after the scope s is applied, in
	// the same round trip; outside a transaction each is still its own
	// commit.
	Scoped(b Batcher, s inboxtype.Scope) db.DBTX
	// Opening returns statements run on b after a handler transaction is
	// opened with scope s (Open says how), in the same round trip; the
	// transaction stays open.
	Opening(b Batcher, s inboxtype.Scope, o Open) db.DBTX
	// OpenTx opens a handler transaction with scope s on b in one round trip
	// and returns its server process ID.
	OpenTx(ctx context.Context, b Batcher, s inboxtype.Scope, timeoutMs int64) (pid uint32, err error)
	// SetScope sets the scope of tx (NoScope clears it).
	SetScope(ctx context.Context, tx pgx.Tx, p db.ScopeApplyParams) error
	// EnsureScope gives tx the scope s unless it has one, and reports the
	// scope tx has and whether this call set it.
	EnsureScope(ctx context.Context, tx pgx.Tx, s inboxtype.Scope) (have inboxtype.Scope, applied bool, err error)

	// Accept runs an accept plan: every Accept* call of a Client ends here.
	Accept(ctx context.Context, p *AcceptPlan) (*Accepted, error)

	// NewClaimer returns the claims of one worker.
	NewClaimer(cfg ClaimerConfig) Claimer
	// QueuePromotion queues, in b, the ordering keys' locks and the
	// promotion of each key's next receipt (scope s), which returns the
	// consumers of the promoted receipts. It runs right before COMMIT.
	QueuePromotion(ctx context.Context, b *pgx.Batch, s inboxtype.Scope, consumers, keys, locks []string)
	// PurgeScopes lists what an operator's purge of every scope purges
	// statement by statement: one entry with all set (one server: one
	// statement across scopes), or the scopes with something to purge
	// before cutoff (Citus: a lock across shards is refused).
	PurgeScopes(ctx context.Context, sys *pgxpool.Pool, cutoff time.Time) (scopes []db.ReceiptPurgeScopesRow, all bool, err error)

	// Outbox returns the outbox's statements.
	Outbox() Outbox
}

// Open says how Opening opens a handler transaction.
type Open struct {
	// TimeoutMs is the transaction's statement and idle timeout.
	TimeoutMs int64
	// PID, when set, receives the server process running the transaction.
	PID *uint32
	// DiscardPlans has the session make its plans again first.
	DiscardPlans bool
}

// Batcher sends a pipelined batch: a pool, a pooled connection or a
// transaction.
type Batcher interface {
	// SendBatch sends b in one round trip.
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// NoScope clears the scope settings: a transaction then sees no scoped row.
var NoScope = db.ScopeApplyParams{}

// ScopeParams returns the settings of scope s.
func ScopeParams(s inboxtype.Scope) db.ScopeApplyParams {
	if s.Kind == inboxtype.ScopeGlobal {
		return db.ScopeApplyParams{Global: "on"}
	}
	return db.ScopeApplyParams{Tenant: s.ID}
}

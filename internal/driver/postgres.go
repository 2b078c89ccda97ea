package driver

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/pipetx"
)

// postgres is the driver of one PostgreSQL server: statements across
// scopes are single statements, and the scope is ScopeApply (set_config,
// local to the transaction).
type postgres struct{}

func (postgres) Name() string { return "postgres" }

func (postgres) Scoped(b Batcher, s inboxtype.Scope) db.DBTX {
	return scopedDB{b: b, p: ScopeParams(s), send: sendPostgres}
}

func (postgres) Opening(b Batcher, s inboxtype.Scope, o Open) db.DBTX {
	return scopedDB{b: b, p: ScopeParams(s), open: o, send: sendPostgres}
}

// genericPlansOn and genericPlansOff bracket the statement that opens a
// handler transaction (ReceiptStart) so it runs on a generic plan, then
// restore the caller's settings for the handler's own statements. Left to
// choose, the server plans it afresh at every call (a custom plan for an
// array of known length looks cheaper), and planning it costs more than
// running it. Both are local to the transaction.
var (
	genericPlansOn  = "SELECT " + pipetx.SaveGenericPlanSettings + ", " + pipetx.ForceGenericPlan
	genericPlansOff = "SELECT " + pipetx.RestoreGenericPlanSettings
)

// sendPostgres sends the scope (ScopeApply), the handler transaction's
// opening when s.open asks for one, and the statement, in one round trip.
func sendPostgres(s scopedDB, ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	opening := s.open.TimeoutMs > 0
	b := &pgx.Batch{}
	if opening {
		queueOpen(b, s.open.TimeoutMs)
		if s.open.DiscardPlans {
			b.Queue("DISCARD PLANS")
		}
		b.Queue(genericPlansOn)
	}
	_ = Queue(b).ScopeApply(ctx, s.p)
	if s.open.PID != nil {
		b.Queue(BackendPIDQuery)
	}
	b.Queue(sql, args...)
	if opening {
		b.Queue(genericPlansOff) // read by the caller's Close
	}
	br := s.b.SendBatch(ctx, b)
	head := 1 // the scope
	if opening {
		head += 3 // BEGIN, the timeouts, genericPlansOn
		if s.open.DiscardPlans {
			head++
		}
	}
	if err := readExecs(br, head); err != nil {
		br.Close()
		return nil, err
	}
	if err := s.readPID(br); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

func (postgres) OpenTx(ctx context.Context, b Batcher, s inboxtype.Scope, timeoutMs int64) (uint32, error) {
	batch := &pgx.Batch{}
	queueOpen(batch, timeoutMs)
	_ = Queue(batch).ScopeApply(ctx, ScopeParams(s))
	batch.Queue(BackendPIDQuery)
	return sendOpening(ctx, b, batch, 3, 0)
}

// sendOpening sends an opening batch whose first n statements are Execs
// (ahead of them may go first: sendScoped), then reads the process ID.
func sendOpening(ctx context.Context, b Batcher, batch *pgx.Batch, n, ahead int) (uint32, error) {
	br := sendScoped(ctx, b, batch, ahead)
	var pid int32
	err := readExecs(br, n)
	if err == nil {
		err = br.QueryRow().Scan(&pid)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return uint32(pid), err
}

func (postgres) SetScope(ctx context.Context, tx pgx.Tx, p db.ScopeApplyParams) error {
	return db.New(tx).ScopeApply(ctx, p)
}

func (postgres) EnsureScope(ctx context.Context, tx pgx.Tx, s inboxtype.Scope) (inboxtype.Scope, bool, error) {
	return ensureScope(ctx, tx, s, nil)
}

// ensureScope reads tx's scope and sets s when it has none (ScopeEnsure);
// then, on a layout whose scope takes more than set_config, again.
func ensureScope(ctx context.Context, tx pgx.Tx, s inboxtype.Scope, again func(context.Context, pgx.Tx, db.ScopeApplyParams) error) (inboxtype.Scope, bool, error) {
	p := ScopeParams(s)
	row, err := db.New(tx).ScopeEnsure(ctx, db.ScopeEnsureParams{ApplyTenant: p.Tenant, ApplyGlobal: p.Global})
	if err != nil {
		return inboxtype.Scope{}, false, err
	}
	if row.Applied {
		if again != nil {
			if err := again(ctx, tx, p); err != nil {
				return inboxtype.Scope{}, false, err
			}
		}
		return s, true, nil
	}
	if row.Tenant != "" {
		return inboxtype.Tenant(row.Tenant), false, nil
	}
	return inboxtype.Global(), false, nil
}

// QueuePromotion runs the promotion on a generic plan: left to choose, the
// server plans it at every commit, and planning it costs more than running
// it. Only COMMIT follows it, so the setting ends with the transaction.
func (postgres) QueuePromotion(ctx context.Context, b *pgx.Batch, s inboxtype.Scope, consumers, keys, locks []string) {
	b.Queue("SELECT " + pipetx.ForceGenericPlan)
	queuePromotion(ctx, b, s, consumers, keys, locks)
}

// queuePromotion queues the keys' locks and the promotion of their next
// receipts (which runs after the locks are granted, with a snapshot taken
// then).
func queuePromotion(ctx context.Context, b *pgx.Batch, s inboxtype.Scope, consumers, keys, locks []string) {
	_ = Queue(b).ReceiptKeyLock(ctx, db.ReceiptKeyLockParams{Keys: locks, ScopeID: s.ID})
	QueueQuery(ctx, b, func(q *db.Queries) error {
		_, err := q.ReceiptPromote(ctx, db.ReceiptPromoteParams{ScopeID: s.ID, ScopeKind: string(s.Kind), Consumers: consumers, Keys: keys})
		return err
	})
}

// PurgeScopes: one statement purges across scopes.
func (postgres) PurgeScopes(context.Context, *pgxpool.Pool, time.Time) ([]db.ReceiptPurgeScopesRow, bool, error) {
	return []db.ReceiptPurgeScopesRow{{}}, true, nil
}

func (postgres) Outbox() Outbox { return postgresOutbox{} }

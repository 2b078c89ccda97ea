package driver

import (
	"context"
	"strconv"
	"strings"
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

// genericPlansOff restores, after the statement that opens a handler
// transaction (ReceiptStart), the caller's plan settings for the handler's
// own statements; the opening saved them and made that statement run on a
// generic plan. Left to choose, the server plans it afresh at every call (a
// custom plan for an array of known length looks cheaper), and planning it
// costs more than running it. Both are local to the transaction.
var genericPlansOff = "SELECT " + pipetx.RestoreGenericPlanSettings

// opening is one statement that opens a transaction after BEGIN: its
// statement and idle timeouts ($1, milliseconds), its scope ($2 tenant, $3
// global, as ScopeApply sets them), with genericPlans the generic plan
// settings (saved first), and with pid the server process ID as its last
// column. One statement instead of four: with one message per handler
// transaction each statement is paid per message.
type opening struct {
	sql  string
	cols int  // columns of its row
	pid  bool // the last column is pg_backend_pid()
}

func newOpening(genericPlans, pid bool) opening {
	q := "SELECT set_config('statement_timeout', $1::text, true), " +
		"set_config('idle_in_transaction_session_timeout', $1::text, true), " +
		"set_config('pginbox.tenant', $2::text, true), set_config('pginbox.global', $3::text, true)"
	if genericPlans {
		q += ", " + pipetx.SaveGenericPlanSettings + ", " + pipetx.ForceGenericPlan
	}
	cols := strings.Count(q, "set_config(")
	if pid {
		q += ", pg_backend_pid()"
		cols++
	}
	return opening{sql: q, cols: cols, pid: pid}
}

// The openings in use: a handler transaction's (ReceiptStart runs on a
// generic plan), with or without its process ID, and OpenTx's.
var (
	openingHandler    = newOpening(true, false)
	openingHandlerPID = newOpening(true, true)
	openingTx         = newOpening(false, true)
)

// queueOpening queues BEGIN and opening o of a transaction with scope p and
// timeouts of ms milliseconds.
func queueOpening(b *pgx.Batch, o opening, p db.ScopeApplyParams, ms int64, discardPlans bool) {
	b.Queue("BEGIN")
	if discardPlans {
		b.Queue("DISCARD PLANS")
	}
	b.Queue(o.sql, strconv.FormatInt(ms, 10), p.Tenant, p.Global)
}

// readOpening reads what queueOpening queued, and with o.pid the process ID
// into pid; the settings' values are skipped, not decoded.
func readOpening(br pgx.BatchResults, o opening, discardPlans bool, pid *uint32) error {
	n := 1 // BEGIN
	if discardPlans {
		n++
	}
	if err := readExecs(br, n); err != nil {
		return err
	}
	if !o.pid {
		_, err := br.Exec()
		return err
	}
	var p int32
	dest := make([]any, o.cols) // nil skips a column
	dest[o.cols-1] = &p
	if err := br.QueryRow().Scan(dest...); err != nil {
		return err
	}
	*pid = uint32(p)
	return nil
}

// sendPostgres sends the scope (ScopeApply), or the handler transaction's
// opening when s.open asks for one, and the statement, in one round trip.
func sendPostgres(s scopedDB, ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	opening := s.open.TimeoutMs > 0
	b := &pgx.Batch{}
	o := openingHandler
	if s.open.PID != nil {
		o = openingHandlerPID
	}
	if opening {
		queueOpening(b, o, s.p, s.open.TimeoutMs, s.open.DiscardPlans)
	} else {
		_ = Queue(b).ScopeApply(ctx, s.p)
		if s.open.PID != nil {
			b.Queue(BackendPIDQuery)
		}
	}
	b.Queue(sql, args...)
	if opening {
		b.Queue(genericPlansOff) // read by the caller's Close
	}
	br := s.b.SendBatch(ctx, b)
	var err error
	if opening {
		err = readOpening(br, o, s.open.DiscardPlans, s.open.PID)
	} else if err = readExecs(br, 1); err == nil {
		err = s.readPID(br)
	}
	if err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

func (postgres) OpenTx(ctx context.Context, b Batcher, s inboxtype.Scope, timeoutMs int64) (uint32, error) {
	batch := &pgx.Batch{}
	queueOpening(batch, openingTx, ScopeParams(s), timeoutMs, false)
	br := b.SendBatch(ctx, batch)
	var pid uint32
	err := readOpening(br, openingTx, false, &pid)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return pid, err
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
